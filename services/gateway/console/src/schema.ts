// What the editor reads from JSON Schemas: the fields of a form (a connector's params, a
// trigger's input_schema), the values typed into them, and the output fields a template can
// reach. Pure functions, no page.

import { type FieldError, parseJSON } from "./ui";

export type Schema = Record<string, any>;

export interface Connector {
  type: string;
  category: "trigger" | "action" | "logic" | "wait";
  title: string;
  description: string;
  params: Schema;
  output_schema?: Schema;
  retry_policy?: { max_attempts: number };
  timeout_ms?: number;
}

// Kind is how a field is typed in: a choice, a checkbox, a number, a line of text, an
// expression, a duration, a timestamp, a group of fields, or JSON for anything free-form.
export type Kind = "enum" | "boolean" | "integer" | "number" | "string" | "expression" | "duration" | "datetime" | "object" | "json";

export interface Field {
  name: string;
  kind: Kind;
  schema: Schema;
  required: boolean;
  title: string; // the name in words
  description?: string;
  choices?: unknown[]; // enum
  fields?: Field[]; // object with properties
  isSchema?: boolean; // the value is itself a JSON Schema
}

// words turns a param name into a label: "timeout_ms" → "Timeout ms".
export const words = (name: string) => {
  const s = name.replace(/[_-]+/g, " ").trim();
  return s ? s[0].toUpperCase() + s.slice(1) : name;
};

const typeOf = (s: Schema): string | undefined => (Array.isArray(s.type) ? s.type.find((t: string) => t !== "null") : s.type);

// kindOf chooses how a value of schema s is typed in.
export function kindOf(s: Schema): Kind {
  if (Array.isArray(s.enum) && s.enum.length > 0) return "enum";
  if (s["x-json-schema"]) return "json";
  if (s["x-expression"]) return "expression";
  switch (typeOf(s)) {
    case "boolean": return "boolean";
    case "integer": return "integer";
    case "number": return "number";
    case "string":
      if (s.format === "go-duration") return "duration";
      if (s.format === "date-time") return "datetime";
      return "string";
    case "object":
      return s.properties && Object.keys(s.properties).length > 0 && s.additionalProperties === false ? "object" : "json";
  }
  return "json";
}

// fieldsOf lists the fields of an object schema, required first, each in its schema's order.
// hidden params (left out of the public catalog already) never show.
export function fieldsOf(s: Schema): Field[] {
  const props: Record<string, Schema> = s?.properties || {};
  const req = new Set<string>(Array.isArray(s?.required) ? s.required : []);
  const out: Field[] = [];
  for (const [name, p] of Object.entries(props)) {
    if (!p || p.hidden) continue;
    const kind = kindOf(p);
    const f: Field = { name, kind, schema: p, required: req.has(name), title: p.title || words(name), description: p.description };
    if (kind === "enum") f.choices = p.enum;
    if (kind === "object") f.fields = fieldsOf(p);
    if (p["x-json-schema"]) f.isSchema = true;
    out.push(f);
  }
  return out.sort((a, b) => Number(b.required) - Number(a.required));
}

// oneOfRequired is the group of params of which exactly one must be set (the wait block's
// duration, until or signal), or null.
export function oneOfRequired(s: Schema): string[] | null {
  const alts = s?.oneOf;
  if (!Array.isArray(alts)) return null;
  const names = alts.map((a: Schema) => (Array.isArray(a?.required) && a.required.length === 1 ? a.required[0] : null));
  return names.every((n) => typeof n === "string") ? (names as string[]) : null;
}

// Raw is what a form holds for an object: the text of each field as typed (a nested object's
// fields under its name), so that a half-typed number or JSON stays on the page.
export type Raw = Record<string, any>;

// toRaw turns a value into the texts of its fields.
export function toRaw(fields: Field[], v: Record<string, unknown> | undefined): Raw {
  const out: Raw = {};
  for (const f of fields) {
    const x = v?.[f.name];
    if (f.kind === "object") out[f.name] = toRaw(f.fields!, (x as any) || undefined);
    else out[f.name] = textOf(f, x);
  }
  return out;
}

// textOf is the text a field shows for value x. A template ("{{ input.n }}") may stand for any
// param, a number or a boolean included: it is shown as it is, and read back as it is.
export function textOf(f: Field, x: unknown): any {
  if (x === undefined || x === null) return "";
  switch (f.kind) {
    case "boolean": return x === true ? "true" : x === false ? "false" : typeof x === "string" ? x : JSON.stringify(x);
    case "enum": return isChoice(f, JSON.stringify(x)) ? JSON.stringify(x) : typeof x === "string" ? x : JSON.stringify(x);
    case "json": return JSON.stringify(x, null, 2);
    case "integer": case "number": return typeof x === "number" || typeof x === "string" ? String(x) : JSON.stringify(x);
    default: return typeof x === "string" ? x : JSON.stringify(x);
  }
}

// isChoice reports whether text is what a choice field holds for one of its choices (or
// nothing): anything else (a template) is shown as text.
export const isChoice = (f: Field, text: string): boolean =>
  text === "" || (f.kind === "boolean" ? text === "true" || text === "false" : (f.choices || []).some((c) => JSON.stringify(c) === text));

// fromRaw reads the value of a form back: fields left empty are absent, a number that is a
// template stays a string (the editor checks it), JSON is parsed. Texts that cannot be read
// become FieldErrors at their pointer (path: base + "/" + name).
export function fromRaw(fields: Field[], raw: Raw, base: string, errs: FieldError[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const f of fields) {
    const ptr = `${base}/${f.name}`, t = raw?.[f.name];
    if (f.kind === "object") {
      const v = fromRaw(f.fields!, t || {}, ptr, errs);
      if (Object.keys(v).length > 0) out[f.name] = v;
      continue;
    }
    if (typeof t !== "string" || t.trim() === "") continue;
    const v = valueOf(f, t, ptr, errs);
    if (v !== undefined) out[f.name] = v;
  }
  return out;
}

const isTemplate = (t: string) => /\{\{[\s\S]*\}\}/.test(t);

function valueOf(f: Field, t: string, ptr: string, errs: FieldError[]): unknown {
  switch (f.kind) {
    case "boolean": case "enum": return isChoice(f, t) ? JSON.parse(t) : t;
    case "integer": case "number": {
      if (isTemplate(t)) return t.trim();
      const n = Number(t);
      if (t.trim() === "" || !Number.isFinite(n)) { errs.push({ path: ptr, message: `${f.title} must be a number.` }); return undefined; }
      if (f.kind === "integer" && !Number.isInteger(n)) { errs.push({ path: ptr, message: `${f.title} must be a whole number.` }); return undefined; }
      return n;
    }
    case "json": {
      try {
        return parseJSON(t, f.title);
      } catch (x) {
        errs.push({ path: ptr, message: (x as Error).message });
        return undefined;
      }
    }
    default: return t;
  }
}

// Ref is a value a template may use: the text to insert and where it comes from.
export interface Ref { expr: string; from: string; type?: string }

// pathsOf lists the fields an output schema names, to depth 3: "status", "headers",
// "signal.name". The branches of a oneOf or anyOf are merged.
export function pathsOf(s: Schema | undefined, depth = 3): { path: string; type?: string }[] {
  const out: { path: string; type?: string }[] = [];
  const seen = new Set<string>();
  const walk = (s: Schema | undefined, prefix: string, d: number) => {
    if (!s || typeof s !== "object" || d <= 0) return;
    for (const alt of [...(s.oneOf || []), ...(s.anyOf || []), ...(s.allOf || [])]) walk(alt, prefix, d);
    for (const [k, p] of Object.entries<Schema>(s.properties || {})) {
      const path = prefix ? `${prefix}.${k}` : k;
      if (!seen.has(path)) {
        seen.add(path);
        out.push({ path, type: typeOf(p || {}) });
      }
      walk(p, path, d - 1);
    }
  };
  walk(s, "", depth);
  return out;
}

// keysOf is what a transform's value gives, read from the value itself: its top-level keys.
export function keysOf(v: unknown): { path: string; type?: string }[] {
  if (!v || typeof v !== "object" || Array.isArray(v)) return [];
  return Object.keys(v).map((k) => ({ path: k }));
}

// ident renders a path segment for expr-lang: a.b when it is an identifier, a["b-c"] else.
export const member = (base: string, key: string) => (/^[A-Za-z_][A-Za-z0-9_]*$/.test(key) ? `${base}.${key}` : `${base}[${JSON.stringify(key)}]`);
export const memberPath = (base: string, path: string) => path.split(".").reduce((acc, k) => member(acc, k), base);

// pointerParts splits a JSON Pointer into its unescaped tokens.
export const pointerParts = (p: string) => (p ? p.split("/").slice(1).map((t) => t.replace(/~1/g, "/").replace(/~0/g, "~")) : []);

// setAt returns a copy of v with the value at the pointer's tokens set (or removed when x is
// undefined).
export function setAt(v: any, parts: string[], x: unknown): any {
  if (parts.length === 0) return x;
  const [k, ...rest] = parts;
  const copy: any = Array.isArray(v) ? [...v] : { ...(v && typeof v === "object" ? v : {}) };
  const next = setAt(copy[k], rest, x);
  if (next === undefined) delete copy[k];
  else copy[k] = next;
  return copy;
}
