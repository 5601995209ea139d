import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import type { K8sObject } from "./kustomize";

/**
 * Unknown fields: kubernetes-models' validators accept fields the schema does not know (their schemas allow
 * additional properties), where `kubectl apply` (strict field validation) refuses them, so a misspelt field
 * (`whenUnsatisfiabel`) would pass the schema check and then fail on a cluster, or worse, be dropped. This
 * walks each object along the interfaces kubernetes-models declares for its kind (its `.d.ts` files, the
 * same OpenAPI definitions) and names every field no interface declares. Maps (`labels`, `requests`) and
 * values of non-object types are not walked into; custom resources are checked at the top level only.
 */

const MODELS_DIR = path.dirname(require.resolve("kubernetes-models"));

interface Shape {
  /** Declared fields, each with the declaration file of its object type (or of its elements'), if any. */
  fields: Map<string, string | undefined>;
}

const shapes = new Map<string, Shape | undefined>();

function resolveImport(from: string, spec: string): string | undefined {
  const file = spec.startsWith(".")
    ? path.resolve(path.dirname(from), `${spec}.d.ts`)
    : (() => {
        const [scope, name, ...rest] = spec.split("/");
        try {
          const main = require.resolve(`${scope}/${name}`, { paths: [MODELS_DIR, path.dirname(from)] });
          return path.join(path.dirname(main), `${rest.join("/")}.d.ts`);
        } catch {
          return undefined;
        }
      })();
  return file !== undefined && existsSync(file) ? file : undefined;
}

/** The first exported interface of a declaration file, or undefined (a type alias such as IntOrString). */
function shapeOf(file: string): Shape | undefined {
  if (shapes.has(file)) return shapes.get(file);
  const text = readFileSync(file, "utf8");
  const imports = new Map<string, string>();
  for (const m of text.matchAll(/^import \{ (\w+) \} from "([^"]+)";$/gm)) imports.set(m[1] as string, m[2] as string);
  const start = /^export interface \w+(?: extends ([\w, ]+))? \{$/m.exec(text);
  if (start === null) {
    shapes.set(file, undefined);
    return undefined;
  }
  const body = text.slice(start.index + start[0].length, text.indexOf("\n}", start.index));
  const fields = new Map<string, string | undefined>();
  if ((start[1] ?? "").includes("TypeMeta")) {
    fields.set("apiVersion", undefined);
    fields.set("kind", undefined);
  }
  for (const m of body.matchAll(/^ {4}"([^"]+)"\??: (.*)$/gm)) {
    const type = (m[2] as string).replace(/;$/, "");
    const named = /^(?:Array<)?(I\w+)>?$/.exec(type)?.[1];
    const spec = named === undefined ? undefined : imports.get(named);
    fields.set(m[1] as string, spec === undefined ? undefined : resolveImport(file, spec));
  }
  const shape = { fields };
  shapes.set(file, shape);
  return shape;
}

function walk(value: unknown, file: string, where: string, problems: string[]): void {
  const shape = shapeOf(file);
  if (shape === undefined || typeof value !== "object" || value === null || Array.isArray(value)) return;
  for (const [key, child] of Object.entries(value)) {
    if (!shape.fields.has(key)) {
      problems.push(`${where}.${key} is not a field of ${path.basename(file, ".d.ts")}`);
      continue;
    }
    const childFile = shape.fields.get(key);
    if (childFile === undefined) continue;
    if (!Array.isArray(child)) walk(child, childFile, `${where}.${key}`, problems);
    else for (const [i, item] of child.entries()) walk(item, childFile, `${where}.${key}[${i}]`, problems);
  }
}

/** Where each kind's declaration is: built-in kinds in kubernetes-models, custom resources in their packages. */
function declarationOf(o: K8sObject): string | undefined {
  const [group, version] = o.apiVersion.includes("/") ? o.apiVersion.split("/") : [undefined, o.apiVersion];
  const builtIn = path.join(MODELS_DIR, group ?? "", version as string, `${o.kind}.d.ts`);
  if (existsSync(builtIn)) return builtIn;
  const custom: Record<string, string> = {
    "keda.sh": "@kubernetes-models/keda",
    "monitoring.coreos.com": "@kubernetes-models/prometheus-operator",
  };
  const pkg = group === undefined ? undefined : custom[group];
  if (pkg === undefined) return undefined;
  const file = path.join(path.dirname(require.resolve(pkg)), group as string, version as string, `${o.kind}.d.ts`);
  return existsSync(file) ? file : undefined;
}

/** Every field of every object that its kind's schema does not declare. */
export function unknownFieldProblems(objects: K8sObject[]): string[] {
  const problems: string[] = [];
  for (const o of objects) {
    const file = declarationOf(o);
    if (file === undefined) problems.push(`${o.kind}/${o.metadata.name}: no declaration of ${o.apiVersion} ${o.kind}`);
    else walk(o, file, `${o.kind}/${o.metadata.name}`, problems);
  }
  return problems;
}
