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
  /**
   * `promptVersion`: the decider's PROMPT_VERSION. Answers (and so the temperatures that fit them) depend on
   * the prompt: a file fitted on another version, or one that does not say, is applied all the same (a
   * refit is the user's call) but said to differ: `warning`, logged at boot and shown by GET /v1/models.
   */
  constructor(
    readonly file: CalibrationFile,
    readonly promptVersion?: string,
  ) {}

  /** Why the file may not fit this decider's answers, or undefined when it was fitted on the same prompt. */
  get warning(): string | undefined {
    const fitted = this.file.prompt_version;
    if (this.promptVersion === undefined || fitted === this.promptVersion) return undefined;
    return fitted === undefined
      ? `the calibration file does not name the prompt version it was fitted on; this decider uses prompt version ${this.promptVersion}: fit it again (pnpm decider eval --fit) to be sure its temperatures fit`
      : `the calibration was fitted on prompt version ${fitted}, this decider uses prompt version ${this.promptVersion}: its temperatures may no longer fit the answers; fit it again (pnpm decider eval --fit)`;
  }

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
    const warning = this.warning;
    return {
      active: true,
      method: file.method,
      version: file.version,
      fitted_at: file.fitted_at,
      ...(this.promptVersion === undefined ? {} : { prompt_version: this.promptVersion }),
      ...(file.prompt_version === undefined ? {} : { fitted_prompt_version: file.prompt_version }),
      ...(warning === undefined ? {} : { warning }),
      data: file.data,
      temperatures: { types, names },
    };
  }
}
