import {
  applyTemperature,
  type CalibrationFile,
  type ModelsCalibration,
  type TextQuestion,
  temperatureFor,
} from "@localdecider/contracts/decider";

/**
 * A loaded calibration file, applied to every answer's final distribution (answer.ts) before score,
 * confidence and choice are derived from it, so those stay consistent with the probabilities shown.
 */
export class Calibration {
  constructor(readonly file: CalibrationFile) {}

  /** The question's distribution under its temperature (unchanged when the file holds none for it). */
  apply(name: string, question: TextQuestion, distribution: readonly number[]): number[] {
    return this.applyKind(name, question.type, distribution);
  }

  /** The same, by the question's name and kind alone (what the decider's internal form carries). */
  applyKind(name: string, kind: TextQuestion["type"], distribution: readonly number[]): number[] {
    return applyTemperature(distribution, temperatureFor(this.file, name, kind));
  }

  /** What GET /v1/models shows: the fit date, the data size and every temperature (no file path). */
  describe(): Extract<ModelsCalibration, { active: true }> {
    const { file } = this;
    const types = Object.fromEntries(
      Object.entries(file.types).flatMap(([type, fitted]) =>
        fitted === undefined ? [] : [[type, fitted.temperature]],
      ),
    );
    const names = Object.fromEntries(
      Object.entries(file.names).map(([name, fitted]) => [
        name,
        { type: fitted.type, temperature: fitted.temperature },
      ]),
    );
    return {
      active: true,
      method: file.method,
      version: file.version,
      fitted_at: file.fitted_at,
      data: file.data,
      temperatures: { types, names },
    };
  }
}
