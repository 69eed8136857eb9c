// The OpenAPI document the gateway serves at /api/openapi.json, read into what the API
// reference (docs.tsx) shows: operations with their parameters, body and responses, every
// local $ref followed. Only what proto/openapi/svc.yaml uses is handled (OpenAPI 3.1, local
// references), and an unknown member is left out rather than guessed at.

export type Schema = any;

export interface Spec {
  openapi: string;
  info: { title: string; version: string; summary?: string; description?: string };
  paths: Record<string, any>;
  components?: Record<string, any>;
  security?: Record<string, string[]>[];
}

export interface Param { name: string; in: string; required: boolean; description?: string; schema?: Schema; deprecated?: boolean }
// Content is one media type of a body: its name and its schema.
export interface Content { type: string; schema?: Schema }
export interface Body { required: boolean; description?: string; content: Content[] }
export interface Header { name: string; description?: string; schema?: Schema; required?: boolean }
export interface Reply { status: string; name?: string; description?: string; headers: Header[]; content: Content[] }

export interface Operation {
  id: string; method: string; path: string; group: string; summary?: string; description?: string;
  service?: string; open: boolean; deprecated: boolean; params: Param[]; body?: Body; responses: Reply[];
  text: string; // what the filter searches, lower case
}

const METHODS = ["get", "put", "post", "patch", "delete", "head", "options", "trace"];

// lookup reads a local JSON Pointer ("#/components/schemas/Run") in the document; anything
// else (another file, a URL) is not served with it and reads as undefined.
function lookup(spec: Spec, ref: string): unknown {
  if (!ref.startsWith("#/")) return undefined;
  let at: any = spec;
  for (const raw of ref.slice(2).split("/")) {
    const key = decodeURIComponent(raw).replace(/~1/g, "/").replace(/~0/g, "~");
    if (at === null || typeof at !== "object" || !(key in at)) return undefined;
    at = at[key];
  }
  return at;
}

// deref follows x's $ref (and the $ref of what it names, and so on) to a value; name is the
// last component followed, which the page shows as the schema's name. A dangling or looping
// chain ends as undefined.
export function deref(spec: Spec, x: any): { node: any; name?: string } {
  let name: string | undefined;
  for (let hops = 0; x && typeof x === "object" && typeof x.$ref === "string"; hops++) {
    if (hops === 32) return { node: undefined, name };
    name = x.$ref.split("/").pop();
    x = lookup(spec, x.$ref);
  }
  return { node: x, name };
}

// groupOf is where an operation without tags is listed: by the first segment under /api
// ("/api/runs"), else by its first segment ("/health").
export function groupOf(path: string): string {
  const seg = path.split("/").filter(Boolean);
  if (seg[0] === "api" && seg.length > 1) return `/api/${seg[1]}`;
  return `/${seg[0] ?? ""}`;
}

const contentOf = (spec: Spec, content: any): Content[] =>
  Object.entries(content ?? {}).map(([type, m]: [string, any]) => ({ type, schema: deref(spec, m).node?.schema }));

function paramsOf(spec: Spec, pathLevel: any[] = [], opLevel: any[] = []): Param[] {
  // An operation's parameter replaces the path's of the same name and location.
  const out = new Map<string, Param>();
  for (const raw of [...pathLevel, ...opLevel]) {
    const p = deref(spec, raw).node;
    if (!p || typeof p.name !== "string") continue;
    out.set(`${p.in}\u0000${p.name}`, {
      name: p.name, in: p.in, required: p.in === "path" || !!p.required, description: p.description,
      schema: p.schema, deprecated: !!p.deprecated,
    });
  }
  const order = ["path", "query", "header", "cookie"];
  return [...out.values()].sort((a, b) => order.indexOf(a.in) - order.indexOf(b.in));
}

function repliesOf(spec: Spec, responses: Record<string, any> = {}): Reply[] {
  return Object.keys(responses).sort().map((status) => {
    const { node, name } = deref(spec, responses[status]);
    const headers = Object.entries(node?.headers ?? {}).map(([h, raw]) => {
      const v = deref(spec, raw).node ?? {};
      return { name: h, description: v.description, schema: v.schema, required: v.required };
    });
    return { status, name, description: node?.description, headers, content: contentOf(spec, node?.content) };
  });
}

// operations lists the document's operations in its own order.
export function operations(spec: Spec): Operation[] {
  const out: Operation[] = [];
  for (const [path, rawItem] of Object.entries(spec.paths ?? {})) {
    const item = deref(spec, rawItem).node ?? {};
    for (const method of METHODS) {
      const op = item[method];
      if (!op) continue;
      const security = op.security ?? spec.security ?? [];
      // An empty list, or an empty requirement in it, asks for no credentials.
      const open = security.length === 0 || security.some((r: object) => Object.keys(r).length === 0);
      const params = paramsOf(spec, item.parameters, op.parameters);
      const rb = op.requestBody ? deref(spec, op.requestBody).node : undefined;
      const body = rb ? { required: !!rb.required, description: rb.description, content: contentOf(spec, rb.content) } : undefined;
      const id = op.operationId ?? `${method} ${path}`;
      const group = op.tags?.[0] ?? groupOf(path);
      const text = [method, path, id, group, op.summary, op.description, op["x-service"], ...params.map((p) => p.name)]
        .filter(Boolean).join(" ").toLowerCase();
      out.push({
        id, method, path, group, summary: op.summary, description: op.description ?? item.description,
        service: op["x-service"], open, deprecated: !!op.deprecated, params, body, responses: repliesOf(spec, op.responses), text,
      });
    }
  }
  return out;
}

// matches reports whether every word of the filter is in what the operation says of itself
// (method, path, operation id, group, summary, description, service, parameter names).
export function matches(op: Operation, filter: string): boolean {
  return filter.toLowerCase().split(/\s+/).filter(Boolean).every((w) => op.text.includes(w));
}

// flatten merges an allOf of object schemas into one object schema (later members win), so
// that a schema made of parts reads as the properties it has; names are the parts' component
// names. A part that is not an object schema leaves the allOf as it is (null).
export function flatten(spec: Spec, s: Schema, depth = 0): { schema: Schema; names: string[] } | null {
  if (!s || !Array.isArray(s.allOf) || depth > 16) return null;
  const merged: any = { type: "object", properties: {}, required: [] as string[] };
  const names: string[] = [];
  for (const part of s.allOf) {
    const { node, name } = deref(spec, part);
    if (!node || typeof node !== "object") return null;
    if (name) names.push(name);
    const inner = Array.isArray(node.allOf) ? flatten(spec, node, depth + 1) : null;
    if (Array.isArray(node.allOf) && !inner) return null;
    const obj = inner ? inner.schema : node;
    if (obj.type !== undefined && obj.type !== "object") return null;
    if (obj.oneOf || obj.anyOf) return null;
    Object.assign(merged.properties, obj.properties ?? {});
    merged.required.push(...(obj.required ?? []));
    if (obj.additionalProperties !== undefined) merged.additionalProperties = obj.additionalProperties;
    if (!merged.description && obj.description) merged.description = obj.description;
  }
  for (const k of ["description", "title"]) if (s[k] !== undefined) merged[k] = s[k];
  Object.assign(merged.properties, s.properties ?? {});
  merged.required = [...new Set([...merged.required, ...(s.required ?? [])])];
  return { schema: merged, names };
}
