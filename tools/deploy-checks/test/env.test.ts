import {
  COMPOSE_FILES,
  composeText,
  envDefault,
  interpolate,
  interpolations,
  loadCompose,
  meansDefault,
  parseEnvExample,
  readRepoFile,
  SECRET_NAME,
  serviceSchemas,
} from "../src/repo";

// The variable lists come from the services' zod config schemas (built dist/config.js), never from a list
// written here: a variable added to a service and not to .env.example or compose fails these tests.
const schemas = serviceSchemas();
const env = parseEnvExample(readRepoFile(".env.example"));
const envByName = new Map(env.map((e) => [e.name, e]));
const compose = loadCompose("docker-compose.yml");
const composeVars = new Set(COMPOSE_FILES.flatMap((file) => interpolations(composeText(file)).map((i) => i.name)));
const schemaVars = new Set(Object.values(schemas).flatMap((schema) => Object.keys(schema.shape)));

/** Values compose fixes for the containers instead of passing the operator's: facts of the container network. */
const FIXED_IN_COMPOSE = new Set([
  "TODOS_HOST",
  "DATABASE_URL",
  "TODOS_DATA_DIR",
  "LOCALDECIDER_HOST",
  "LOCALDECIDER_UPSTREAM",
]);

describe(".env.example against the services' config schemas", () => {
  it("lists every variable of both schemas, once", () => {
    const names = env.map((e) => e.name);
    expect(names.length).toBe(new Set(names).size);
    const missing = [...schemaVars].filter((name) => !envByName.has(name));
    expect(missing).toStrictEqual([]);
  });

  it("lists nothing that is neither a service variable nor used by a compose file", () => {
    const unknown = env.map((e) => e.name).filter((name) => !schemaVars.has(name) && !composeVars.has(name));
    expect(unknown).toStrictEqual([]);
  });

  it("gives each service variable the service's own default (empty for optional ones)", () => {
    for (const [service, schema] of Object.entries(schemas)) {
      for (const name of Object.keys(schema.shape)) {
        // Compared as the service reads them: `1mb` in the file is the default 1048576 bytes.
        const value = envByName.get(name)?.value;
        const isDefault = value !== undefined && meansDefault(schema, name, value);
        expect({ service, name, value, isDefault }).toStrictEqual({
          service,
          name,
          value,
          isDefault: true,
          ...(isDefault ? {} : { default: envDefault(schema, name) }),
        });
      }
    }
  });

  it("describes every variable", () => {
    const undescribed = env.filter((e) => e.description.length < 10).map((e) => e.name);
    expect(undescribed).toStrictEqual([]);
  });

  it("holds no secret values", () => {
    const filled = env.filter((e) => SECRET_NAME.test(e.name) && e.value !== "").map((e) => e.name);
    expect(filled).toStrictEqual([]);
  });
});

describe("docker-compose.yml against the services' config schemas", () => {
  for (const service of ["todos", "decider"] as const) {
    it(`passes the ${service} container exactly its schema's variables`, () => {
      const environment = Object.keys(compose.services[service]?.environment ?? {}).sort();
      expect(environment).toStrictEqual(Object.keys(schemas[service].shape).sort());
    });

    it(`passes each ${service} variable from .env (service default or none) unless it is a container fact`, () => {
      const schema = schemas[service];
      for (const [name, value] of Object.entries(compose.services[service]?.environment ?? {})) {
        const entry = envByName.get(name);
        if (FIXED_IN_COMPOSE.has(name)) {
          // Shown commented out in .env.example: setting it in .env would change nothing.
          expect({ name, setByCompose: entry?.setByCompose }).toStrictEqual({ name, setByCompose: true });
          continue;
        }
        const used = interpolations(String(value));
        expect({ name, interpolated: used.map((u) => u.name) }).toStrictEqual({ name, interpolated: [name] });
        const fallback = used[0]?.fallback ?? "";
        // `${NAME:-}` leaves the default to the service; a written fallback must be the service's default.
        if (fallback !== "") {
          expect({ name, fallback, isDefault: meansDefault(schema, name, fallback) }).toStrictEqual({
            name,
            fallback,
            isDefault: true,
          });
        }
        expect({ name, setByCompose: entry?.setByCompose }).toStrictEqual({ name, setByCompose: false });
      }
    });
  }

  it("declares in .env.example every variable any compose file interpolates, with the same default", () => {
    for (const file of COMPOSE_FILES) {
      for (const use of interpolations(composeText(file))) {
        const entry = envByName.get(use.name);
        expect({ file, name: use.name, listed: entry !== undefined }).toStrictEqual({
          file,
          name: use.name,
          listed: true,
        });
        if (use.fallback !== undefined && use.fallback !== "") {
          expect({ file, name: use.name, value: entry?.value }).toStrictEqual({
            file,
            name: use.name,
            value: use.fallback,
          });
        }
      }
    }
  });

  it("agrees between the services on the variables they share (LOG_LEVEL, LOG_FORMAT)", () => {
    const shared = Object.keys(schemas.todos.shape).filter((name) => name in schemas.decider.shape);
    expect(shared).toStrictEqual(["LOG_LEVEL", "LOG_FORMAT"]);
    for (const name of shared) expect(envDefault(schemas.todos, name)).toBe(envDefault(schemas.decider, name));
  });
});

describe("the drift checks themselves", () => {
  it("find a variable missing from .env.example and a stale one", () => {
    const trimmed = parseEnvExample("# Port.\nTODOS_PORT=3000\n# Gone.\nTODOS_OLD=1\n");
    const names = new Set(trimmed.map((e) => e.name));
    expect([...schemaVars].filter((n) => !names.has(n))).toContain("LOCALDECIDER_TIMEOUT");
    expect(trimmed.map((e) => e.name).filter((n) => !schemaVars.has(n) && !composeVars.has(n))).toStrictEqual([
      "TODOS_OLD",
    ]);
  });

  it("fill in values as compose does: defaults, required ones refused when unset or empty, $$ a literal $", () => {
    const env = { A: "a", EMPTY: "" };
    // biome-ignore lint/suspicious/noTemplateCurlyInString: compose interpolation syntax, not a JS template
    expect(interpolate("${A} $A ${B:-x} ${EMPTY:-y} ${EMPTY-z} $${A} $$A ${A:?m}", env)).toBe("a a x y  ${A} $A a");
    // biome-ignore lint/suspicious/noTemplateCurlyInString: compose interpolation syntax, not a JS template
    expect(() => interpolate("${B:?set B in .env}", env)).toThrow(
      "required variable B is missing a value: set B in .env",
    );
    // biome-ignore lint/suspicious/noTemplateCurlyInString: compose interpolation syntax, not a JS template
    expect(() => interpolate("${EMPTY:?set it}", env)).toThrow("required variable EMPTY is missing a value: set it");
  });

  it("read interpolations with and without defaults, required ones, and skip escaped $$", () => {
    // biome-ignore lint/suspicious/noTemplateCurlyInString: compose interpolation syntax, not a JS template
    expect(interpolations("a ${A:-x} ${B:-} ${C} ${D:?msg} $${E} ${F-y}")).toStrictEqual([
      { name: "A", fallback: "x", required: false },
      { name: "B", fallback: "", required: false },
      { name: "C", fallback: undefined, required: false },
      { name: "D", fallback: undefined, required: true },
      { name: "F", fallback: "y", required: false },
    ]);
  });
});
