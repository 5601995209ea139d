import { COMPOSE_FILES, composeText, interpolate, interpolations, parseEnvExample, readRepoFile } from "../src/repo";

/** The comment lines a file opens with: its instructions, as a person reads them before anything else. */
function header(file: string): string {
  const lines = readRepoFile(file).split("\n");
  const end = lines.findIndex((line) => !line.startsWith("#"));
  return lines.slice(0, end === -1 ? lines.length : end).join("\n");
}

/** The variables a compose file refuses to start without (`${NAME:?message}`). */
function required(file: string): string[] {
  return [
    ...new Set(
      interpolations(composeText(file))
        .filter((i) => i.required)
        .map((i) => i.name),
    ),
  ].sort();
}

describe("the instructions that open docker-compose.yml and .env.example", () => {
  it("docker-compose.yml's first lines name every variable it refuses to start without", () => {
    const names = required("docker-compose.yml");
    expect(names).toStrictEqual(["POSTGRES_ADMIN_PASSWORD", "POSTGRES_PASSWORD"]);
    const text = header("docker-compose.yml");
    expect(text).toContain("cp .env.example .env");
    expect(names.filter((name) => !new RegExp(`\\b${name}\\b`).test(text))).toStrictEqual([]);
  });

  it(".env.example's first lines name every variable a compose file refuses to start without", () => {
    const text = header(".env.example");
    const names = [...new Set(COMPOSE_FILES.flatMap(required))];
    expect(names.filter((name) => !new RegExp(`\\b${name}\\b`).test(text))).toStrictEqual([]);
  });

  it("followed as written (.env.example with those set), compose fills in every value of docker-compose.yml", () => {
    const env = Object.fromEntries(parseEnvExample(readRepoFile(".env.example")).map((e) => [e.name, e.value]));
    const text = composeText("docker-compose.yml");
    // As copied, compose refuses: the passwords are empty on purpose.
    expect(() => interpolate(text, env)).toThrow("required variable");
    const set = { ...env, POSTGRES_PASSWORD: "todos-secret", POSTGRES_ADMIN_PASSWORD: "admin-secret" };
    expect(() => interpolate(text, set)).not.toThrow();
    // Setting only the one the file used to name is not enough.
    expect(() => interpolate(text, { ...env, POSTGRES_PASSWORD: "todos-secret" })).toThrow(
      "required variable POSTGRES_ADMIN_PASSWORD is missing a value",
    );
  });
});
