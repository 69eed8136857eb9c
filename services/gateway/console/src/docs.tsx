// The API reference at /docs: the OpenAPI document the gateway serves openly at
// /api/openapi.json, drawn as a page. Open like the document itself: no session is needed,
// and /api/openapi.json takes no rate-limit token.
import type { ComponentChildren } from "preact";
import { useEffect, useMemo, useState } from "preact/hooks";
import { get, withQuery } from "./api";
import { describeError } from "./ui";
import { deref, flatten, matches, operations, type Body, type Content, type Operation, type Param, type Reply, type Schema, type Spec } from "./openapi";

export const OPENAPI_PATH = "/api/openapi.json";

// The document is read once per page load: the signed-out page and the console's shell both
// show the reference, and going from one to the other reads nothing again.
let specLoad: Promise<Spec> | null = null;
const loadSpec = () =>
  (specLoad ??= get<Spec>(OPENAPI_PATH).catch((x) => {
    specLoad = null;
    throw x;
  }));

// Text renders a description: paragraphs at blank lines, `code` in backticks.
export function Text({ s, class: cls }: { s?: string; class?: string }) {
  if (!s) return null;
  return (
    <div class={cls ?? "text"}>
      {s.trim().split(/\n\s*\n/).map((para, i) => (
        <p key={i}>{para.split("`").map((bit, j) => (j % 2 ? <code key={j}>{bit}</code> : bit))}</p>
      ))}
    </div>
  );
}

// --- schemas

// The keywords shown beside a schema's type, with how they read.
const CONSTRAINTS: [string, string][] = [
  ["format", "format"], ["pattern", "pattern"], ["minLength", "minLength"], ["maxLength", "maxLength"],
  ["minimum", "minimum"], ["exclusiveMinimum", "exclusiveMinimum"], ["maximum", "maximum"], ["exclusiveMaximum", "exclusiveMaximum"],
  ["multipleOf", "multipleOf"], ["minItems", "minItems"], ["maxItems", "maxItems"], ["minProperties", "minProperties"],
  ["maxProperties", "maxProperties"], ["default", "default"],
];

const show = (v: unknown) => (typeof v === "string" ? v : JSON.stringify(v));

// typeOf is a schema's type in a few words: "string", "string | null", "array of string",
// "object", "const "ok"", "enum", "any".
function typeOf(spec: Spec, s: Schema, depth = 0): string {
  if (s === true || s === undefined || s === null) return "any";
  if (s === false) return "nothing";
  if (s.const !== undefined) return `const ${JSON.stringify(s.const)}`;
  if (Array.isArray(s.type)) return s.type.join(" | ");
  if (s.type === "array" || (s.type === undefined && s.items !== undefined)) {
    const { node, name } = deref(spec, s.items);
    if (depth < 3 && (name || simple(node))) return `array of ${name ?? typeOf(spec, node, depth + 1)}`;
    return "array";
  }
  if (typeof s.type === "string") return s.type;
  if (s.enum) return "enum";
  if (s.properties || s.allOf) return "object";
  if (s.oneOf) return "one of";
  if (s.anyOf) return "any of";
  return "any";
}

// simple reports whether a schema is said in full by its type and constraints (nothing nested).
const simple = (s: Schema) =>
  s === undefined || s === true || (typeof s === "object" && !s.properties && !s.items && !s.allOf && !s.oneOf && !s.anyOf &&
    !(s.additionalProperties && typeof s.additionalProperties === "object"));

function Constraints({ s }: { s: Schema }) {
  if (!s || typeof s !== "object") return null;
  const chips: ComponentChildren[] = [];
  if (Array.isArray(s.enum)) chips.push(<span class="c" key="enum">one of {s.enum.map((v: unknown, i: number) => <code key={i}>{show(v)}</code>)}</span>);
  for (const [k, label] of CONSTRAINTS) if (s[k] !== undefined) chips.push(<span class="c" key={k}>{label} <code>{show(s[k])}</code></span>);
  if (s.uniqueItems) chips.push(<span class="c" key="unique">unique items</span>);
  if (Array.isArray(s.examples) && s.examples.length) chips.push(<span class="c" key="ex">e.g. {s.examples.map((v: unknown, i: number) => <code key={i}>{show(v)}</code>)}</span>);
  if (s.readOnly) chips.push(<span class="c" key="ro">read only</span>);
  if (s.writeOnly) chips.push(<span class="c" key="wo">write only</span>);
  if (s.deprecated) chips.push(<span class="c warn" key="dep">deprecated</span>);
  return chips.length ? <>{chips}</> : null;
}

// SchemaView draws a JSON Schema: its type and constraints on one line, its description, then
// what it holds (properties, items, alternatives), each drawn the same way. A component met
// again inside itself is named, not drawn again. A component is folded (its name and type
// shown, the rest a click away) unless expand: the same Error would otherwise fill every error
// response, and the shapes of a request's body and its success are what a reader came for.
export function SchemaView({ spec, schema, seen = [], expand = false }: { spec: Spec; schema: Schema; seen?: string[]; expand?: boolean }) {
  const { node, name } = deref(spec, schema);
  if (name && seen.includes(name)) return <span class="schema"><span class="type">{name}</span> <small>(as above)</small></span>;
  if (seen.length > 12) return <span class="schema"><span class="type">…</span></span>;
  const inside = name ? [...seen, name] : seen;
  const flat = flatten(spec, node);
  const s = flat ? flat.schema : node;
  const parts = flat?.names.length ? <small> (all of {flat.names.join(", ")}{flat.names.length < (node.allOf?.length ?? 0) ? ", …" : ""})</small> : null;
  const said = typeOf(spec, s);
  const line = (
    <>
      {name && <span class="ref" title={`#/components/schemas/${name}`}>{name}</span>}
      <span class="type">{said}</span>{parts}
      <Constraints s={s} />
    </>
  );
  const rest = s && typeof s === "object" && (
    <>
      <Text s={s.description} class="desc" />
      <Holds spec={spec} s={s} seen={inside} said={said} />
    </>
  );
  if (name && !simple(s)) {
    return <details class="schema" open={expand}><summary class="line">{line}</summary>{rest}</details>;
  }
  return <div class="schema"><div class="line">{line}</div>{rest}</div>;
}

// Holds draws what a schema contains; said is its type line, so that "one of" is not said twice.
function Holds({ spec, s, seen, said }: { spec: Spec; s: any; seen: string[]; said: string }) {
  const required = new Set<string>(s.required ?? []);
  const props = Object.entries(s.properties ?? {});
  // Items said in full by the type line ("array of string") are not drawn again; a component
  // is, for its properties.
  const it = s.items !== undefined ? deref(spec, s.items) : undefined;
  const items = it && (it.name || !simple(it.node)) ? s.items : undefined;
  const extra = s.additionalProperties;
  const alts: [string, any[]][] = [];
  if (Array.isArray(s.oneOf)) alts.push(["one of", s.oneOf]);
  if (Array.isArray(s.anyOf)) alts.push(["any of", s.anyOf]);
  if (Array.isArray(s.allOf) && !props.length) alts.push(["all of", s.allOf]);
  return (
    <>
      {props.length > 0 && (
        <ul class="props">
          {props.map(([k, v]) => (
            <li key={k} data-prop={k}>
              <code class="prop">{k}</code>{required.has(k) ? <span class="req">required</span> : null}
              <SchemaView spec={spec} schema={v} seen={seen} />
            </li>
          ))}
        </ul>
      )}
      {props.length > 0 && extra === false && <div class="note-line">No other properties.</div>}
      {extra && typeof extra === "object" && (
        <div class="nested"><small>other properties:</small> <SchemaView spec={spec} schema={extra} seen={seen} /></div>
      )}
      {items !== undefined && <div class="nested"><small>items:</small> <SchemaView spec={spec} schema={items} seen={seen} /></div>}
      {alts.map(([label, list]) => (
        <div class="nested" key={label}>
          {label !== said && <small>{label}:</small>}
          <ol class="alts">{list.map((x, i) => <li key={i}><SchemaView spec={spec} schema={x} seen={seen} /></li>)}</ol>
        </div>
      ))}
    </>
  );
}

// --- an operation

function Params({ spec, params }: { spec: Spec; params: Param[] }) {
  return (
    <div class="table-scroll"><table class="params">
      <thead><tr><th scope="col">name</th><th scope="col">in</th><th scope="col">required</th><th scope="col">schema</th></tr></thead>
      <tbody>
        {params.map((p) => (
          <tr key={`${p.in} ${p.name}`} data-param={p.name}>
            <td><code class="prop">{p.name}</code></td>
            <td>{p.in}</td>
            <td>{p.required ? <span class="req">required</span> : "optional"}{p.deprecated && <span class="c warn">deprecated</span>}</td>
            <td>{p.schema !== undefined && <SchemaView spec={spec} schema={p.schema} />}<Text s={p.description} class="desc" /></td>
          </tr>
        ))}
      </tbody>
    </table></div>
  );
}

function Contents({ spec, content, expand }: { spec: Spec; content: Content[]; expand: boolean }) {
  return (
    <>
      {content.map((c) => (
        <div class="media" key={c.type}>
          <small class="mt">{c.type}</small>
          {c.schema !== undefined && <SchemaView spec={spec} schema={c.schema} expand={expand} />}
        </div>
      ))}
    </>
  );
}

function RequestBody({ spec, body }: { spec: Spec; body: Body }) {
  return (
    <div class="body" data-testid="request-body">
      <small class="mt">{body.required ? "required" : "optional"}</small>
      <Text s={body.description} class="desc" />
      <Contents spec={spec} content={body.content} expand />
    </div>
  );
}

function Responses({ spec, replies }: { spec: Spec; replies: Reply[] }) {
  return (
    <ul class="replies">
      {replies.map((r) => (
        <li key={r.status} data-response={r.status}>
          <span class={`code c${r.status[0]}`}>{r.status}</span>
          {r.name && <span class="ref" title={`#/components/responses/${r.name}`}>{r.name}</span>}
          <Text s={r.description} class="desc" />
          {r.headers.length > 0 && (
            <div class="nested">
              <small>headers:</small>
              <ul class="props">
                {r.headers.map((h) => (
                  <li key={h.name}><code class="prop">{h.name}</code><SchemaView spec={spec} schema={h.schema} /><Text s={h.description} class="desc" /></li>
                ))}
              </ul>
            </div>
          )}
          <Contents spec={spec} content={r.content} expand={r.status.startsWith("2")} />
        </li>
      ))}
    </ul>
  );
}

function OperationView({ spec, op, open, toggle }: { spec: Spec; op: Operation; open: boolean; toggle: () => void }) {
  return (
    <article class={`op${open ? " open" : ""}`} id={`op-${op.id}`} data-op={op.id}>
      <button class="op-head" aria-expanded={open} onClick={toggle}>
        <span class={`method m-${op.method}`}>{op.method.toUpperCase()}</span>
        <code class="path">{op.path}</code>
        <span class="sum">{op.summary}</span>
        {op.open && <span class="badge open" title="No credentials, no rate-limit token">open</span>}
        {op.deprecated && <span class="badge warn">deprecated</span>}
      </button>
      {open && (
        <div class="op-body">
          <p class="meta">
            <code>{op.id}</code>
            {op.service && <> · served by <b>{op.service}</b></>}
            {" · "}{op.open ? "open: no credentials needed" : "guarded: a session or an API key, and one rate-limit token"}
            {" · "}<a href={`#op-${op.id}`}>link</a>
          </p>
          <Text s={op.description} />
          {op.params.length > 0 && <><h4>Parameters</h4><Params spec={spec} params={op.params} /></>}
          {op.body && <><h4>Request body</h4><RequestBody spec={spec} body={op.body} /></>}
          <h4>Responses</h4>
          <Responses spec={spec} replies={op.responses} />
        </div>
      )}
    </article>
  );
}

// --- the page

// Few enough matches are opened at once: a filter that found what it looked for shows it.
const OPEN_UP_TO = 3;

function Security({ spec }: { spec: Spec }) {
  const schemes = Object.entries(spec.components?.securitySchemes ?? {});
  if (!schemes.length) return null;
  return (
    <ul class="schemes">
      {schemes.map(([k, raw]) => {
        const s: any = deref(spec, raw).node ?? {};
        const where = s.type === "apiKey" ? `${s.in} ${s.name}` : s.type === "http" ? `Authorization: ${s.scheme}` : s.type;
        return <li key={k}><b>{k}</b>: <code>{where}</code>{s.description && <> — {s.description}</>}</li>;
      })}
    </ul>
  );
}

const slug = (s: string) => s.replace(/[^A-Za-z0-9]+/g, "-").replace(/^-|-$/g, "") || "root";

export function Docs({ signedIn }: { signedIn: boolean }) {
  const [spec, setSpec] = useState<Spec | null>(null);
  const [err, setErr] = useState<unknown>();
  const [q, setQ] = useState(() => new URLSearchParams(location.search).get("q") ?? "");
  // What the reader opened or closed by hand; the rest follows OPEN_UP_TO.
  const [toggled, setToggled] = useState<Map<string, boolean>>(() => {
    const m = new Map<string, boolean>();
    if (location.hash.startsWith("#op-")) m.set(decodeURIComponent(location.hash.slice(4)), true);
    return m;
  });

  useEffect(() => {
    let live = true;
    loadSpec().then((s) => live && setSpec(s), (x) => live && setErr(x));
    const title = document.title;
    document.title = "API reference · svc";
    return () => { live = false; document.title = title; };
  }, []);

  const ops = useMemo(() => (spec ? operations(spec) : []), [spec]);
  const shown = ops.filter((op) => matches(op, q));
  const byGroup = new Map<string, Operation[]>();
  for (const op of shown) byGroup.set(op.group, [...(byGroup.get(op.group) ?? []), op]);
  const groups = [...byGroup.entries()];

  // A linked operation is scrolled to once the page holds it.
  useEffect(() => {
    if (spec && location.hash.startsWith("#op-")) document.getElementById(decodeURIComponent(location.hash.slice(1)))?.scrollIntoView();
  }, [spec]);

  const filter = (v: string) => {
    setQ(v);
    // The filter stays in the address, so a reload or a shared link shows the same.
    history.replaceState(history.state, "", withQuery(location.pathname, { q: v.trim() }));
  };
  const isOpen = (op: Operation) => toggled.get(op.id) ?? shown.length <= OPEN_UP_TO;
  const toggle = (op: Operation) => setToggled((m) => new Map(m).set(op.id, !isOpen(op)));

  return (
    <section class="docs" data-testid="docs">
      <h1>{spec?.info.title ?? "svc"} API reference {spec && <small>v{spec.info.version} · OpenAPI {spec.openapi}</small>}</h1>
      {err ? <p class="error" role="alert">The reference could not be read from <a href={OPENAPI_PATH}>{OPENAPI_PATH}</a>: {describeError(err).text}</p> : null}
      {!spec && !err && <p>Loading…</p>}
      {spec && (
        <>
          {spec.info.summary && <p class="lead">{spec.info.summary}</p>}
          <div class="card">
            <Text s={spec.info.description} />
            <p>Credentials, for the guarded operations:</p>
            <Security spec={spec} />
            <ul class="links">
              <li>The document itself: <a href={OPENAPI_PATH} data-testid="raw-openapi">{OPENAPI_PATH}</a> (OpenAPI {spec.openapi}, JSON; open, for client generators and tools).</li>
              <li>For AI agents: the same API as MCP tools at <code>POST /api/mcp</code> (streamable HTTP, guarded like the rest), or over stdio with <code>svc mcp</code>; the tools, resources and how to connect a client are in <code>docs/MCP.md</code> of the repository.</li>
              <li>From a shell: the <code>svc</code> command line (<code>svc login</code>, then <code>svc workflows</code>, <code>svc run</code>, <code>svc runs logs --follow</code>).</li>
              {!signedIn && <li>To see your workflows and runs: <a href="/signin">sign in to the console</a>.</li>}
            </ul>
          </div>
          <div class="filters docs-filter">
            <input type="search" aria-label="Filter operations" placeholder="Filter: a path, a method, an operation id, words of a summary" value={q}
              onInput={(e) => filter((e.target as HTMLInputElement).value)} />
            <span class="hint" data-testid="op-count">{shown.length === ops.length ? `${ops.length} operations` : `${shown.length} of ${ops.length} operations`}</span>
          </div>
          {shown.length === 0 && <p class="empty">No operation matches “{q}”.</p>}
          {groups.length > 1 && (
            <p class="toc">{groups.map(([g, list]) => <a key={g} href={`#group-${slug(g)}`}>{g} <small>{list.length}</small></a>)}</p>
          )}
          {groups.map(([g, list]) => (
            <div class="group" key={g} id={`group-${slug(g)}`}>
              <h2><code>{g}</code></h2>
              {list.map((op) => <OperationView key={op.id} spec={spec} op={op} open={isOpen(op)} toggle={() => toggle(op)} />)}
            </div>
          ))}
        </>
      )}
    </section>
  );
}
