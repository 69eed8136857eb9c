// Pieces every page of the console uses: routing, links, errors, loading and models.
import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import { APIError } from "./api";
import type { Model, PagedList } from "./lists";

// --- routing: the History API; the gateway answers every console path with index.html.
export const navigate = (to: string) => {
  history.pushState(null, "", to);
  dispatchEvent(new PopStateEvent("popstate"));
};
export function usePath() {
  const [path, setPath] = useState(location.pathname + location.search);
  useEffect(() => {
    const on = () => setPath(location.pathname + location.search);
    addEventListener("popstate", on);
    return () => removeEventListener("popstate", on);
  }, []);
  return path;
}
export const A = ({ href, children, ...rest }: any) => (
  <a href={href} onClick={(e: MouseEvent) => { if (!e.ctrlKey && !e.metaKey) { e.preventDefault(); navigate(href); } }} {...rest}>{children}</a>
);

// cut shortens s to n characters, the last an ellipsis.
export const cut = (s: string, n: number) => (s.length > n ? s.slice(0, n - 1) + "…" : s);

// sentence ends a message with a full stop, so that another sentence can follow it.
export const sentence = (m: string) => (/[.!?]$/.test(m) ? m : m + ".");

// words turns an API message into a sentence: a first word in lower case ("the run is…",
// "cron is empty…") gets its capital; a name ("workflowId is…") stays as written.
export const words = (m: string) => sentence(m.trim().replace(/^([a-z]+)\b/, (w) => w[0].toUpperCase() + w.slice(1)));

// The auth layer's codes (better-auth's) in plain sentences: the codes a person meets signing
// in or up, managing keys and organizations. A code not listed shows the layer's own message.
const AUTH_WORDS: Record<string, string> = {
  INVALID_EMAIL_OR_PASSWORD: "The email or the password is not right. Check both and try again.",
  INVALID_CREDENTIALS: "The email or the password is not right. Check both and try again.",
  INVALID_PASSWORD: "The password is not right.",
  INVALID_EMAIL: "That is not an email address.",
  USER_NOT_FOUND: "No account has this email. Check it, or create an account.",
  USER_ALREADY_EXISTS: "An account with this email already exists. Sign in instead, or use another email.",
  USER_ALREADY_EXISTS_USE_ANOTHER_EMAIL: "An account with this email already exists. Sign in instead, or use another email.",
  PASSWORD_TOO_SHORT: "The password is too short: use at least 8 characters.",
  PASSWORD_TOO_LONG: "The password is too long: use at most 128 characters.",
  EMAIL_NOT_VERIFIED: "This email address is not verified yet.",
  UNAUTHORIZED: "You are not signed in, or your session ended. Sign in again.",
  INVALID_TOKEN: "This link or key is not valid any more.",
  SESSION_EXPIRED: "Your session ended. Sign in again.",
  MISSING_OR_NULL_ORIGIN: "The server did not accept where this request came from. Open the console at the server's own address (SVC_PUBLIC_URL) and try again.",
  INVALID_ORIGIN: "The server does not trust this page's address. Open the console at the server's own address, or add this one to SVC_TRUSTED_ORIGINS.",
  NO_ACTIVE_ORGANIZATION: "Choose an organization first.",
  ORGANIZATION_ALREADY_EXISTS: "An organization with this name or slug already exists: choose another.",
  USER_IS_NOT_A_MEMBER_OF_THE_ORGANIZATION: "You are not a member of that organization.",
  KEY_NOT_FOUND: "This API key does not exist any more: it may have been revoked already.",
  INVALID_REFERENCE_ID_FROM_API_KEY: "An API key cannot manage API keys: sign in to do this.",
  RATE_LIMITED: "Too many attempts.",
  INTERNAL_SERVER_ERROR: "Something went wrong on the server. Try again in a moment.",
};

// The services' codes, in words, for an answer that carries no message of its own.
const CODE_WORDS: Record<string, string> = {
  not_found: "Nothing was found at this address in your organization.",
  unauthorized: "You are not signed in, or your session ended. Sign in again.",
  no_active_organization: "Choose an organization first.",
  invalid_origin: "The server did not accept where this request came from. Reload the page and try again.",
  rate_limited: "Too many requests.",
  payload_too_large: "What was sent is too large.",
  unavailable: "A service is unavailable right now. Try again in a moment.",
  internal: "Something went wrong on the server. Try again in a moment.",
  method_not_allowed: "The server does not allow this here.",
};

// Said is an error put in words: text is what a person reads; code is the machine's code,
// kept for a title attribute (support can ask for it), never the headline.
export interface Said { text: string; code?: string }

// describeError says any error in words: an APIError by its message (or, for the auth layer's
// codes and an answer without a message, a sentence of its own), a 429 with its wait, a
// failed fetch as the server not reached, any other Error by its message.
export function describeError(err: unknown): Said {
  if (err instanceof APIError) {
    const { code, status } = err;
    const own = err.message && err.message !== code ? err.message : "";
    let text: string;
    if (AUTH_WORDS[code] && (/^[A-Z0-9_]+$/.test(code))) text = AUTH_WORDS[code];
    else if (own) text = words(own);
    else if (CODE_WORDS[code]) text = CODE_WORDS[code];
    else if (/^http_\d+$/.test(code)) text = `The server answered with status ${status}. Try again in a moment.`;
    else text = words(code.toLowerCase().replace(/_/g, " "));
    if (err.retryAfterMs) text = `${sentence(text)} Try again in ${Math.ceil(err.retryAfterMs / 1000)} s.`;
    return { text, code };
  }
  if (err instanceof TypeError && /fetch|network/i.test(err.message)) {
    return { text: "The server could not be reached. Check the connection, then try again." };
  }
  if (err instanceof Error) return { text: words(err.message) };
  if (err instanceof DOMException) return { text: words(err.message) };
  return { text: words(String(err)) };
}

// FieldError is one field an answer refused: path is a JSON Pointer into what was sent
// ("/input/email", "/cron"), relative to `under` when fieldErrors was given one; message says
// what is wrong; didYouMean is the value meant, when the API knows it.
export interface FieldError { path: string; message: string; didYouMean?: string }

// fieldErrors lists the fields an API error names: the `issues` of a 400 invalid_body (a run
// input that fails its trigger's input_schema: /input/<field>; a schedule without workflowId:
// /workflowId; a body member of the wrong type). With `under` ("/input"), only the issues at
// or below that pointer, their paths made relative to it ("/input/n" → "/n", "/input" → "").
// Anything else (no issues, not an APIError) is [].
export function fieldErrors(err: unknown, under = ""): FieldError[] {
  if (!(err instanceof APIError)) return [];
  const issues = (err.body as any)?.issues;
  if (!Array.isArray(issues)) return [];
  const out: FieldError[] = [];
  for (const i of issues) {
    if (!i || typeof i.message !== "string") continue;
    const path = typeof i.path === "string" ? i.path : "";
    if (under && path !== under && !path.startsWith(under + "/")) continue;
    const f: FieldError = { path: path.slice(under.length), message: i.message };
    if (typeof i.did_you_mean === "string" && i.did_you_mean) f.didYouMean = i.did_you_mean;
    out.push(f);
  }
  return out;
}

// fieldName says a JSON Pointer as a person reads it: "/input/items/0/name" → "input.items[0].name".
export const fieldName = (pointer: string) =>
  pointer.split("/").slice(1).map((t) => t.replace(/~1/g, "/").replace(/~0/g, "~"))
    .reduce((s, t) => (/^\d+$/.test(t) ? `${s}[${t}]` : s ? `${s}.${t}` : t), "");

export const ErrorBox = ({ err }: { err: unknown }) => {
  if (!err) return null;
  const said = describeError(err);
  // The fields named, when they say more than the message (which is the first one's).
  const fields = fieldErrors(err).filter((f, i, all) => all.length > 1 || f.path !== "" || words(f.message) !== said.text);
  return (
    <div class="error" role="alert" data-code={said.code} title={said.code ? `code: ${said.code}` : undefined}>
      {said.text}
      {fields.length > 0 && (
        <ul class="issues">
          {fields.map((f, i) => <li key={i} data-field={f.path}>{f.path && <b>{fieldName(f.path)}</b>}{f.path && ": "}{f.message}{f.didYouMean && <> (did you mean <code>{f.didYouMean}</code>?)</>}</li>)}
        </ul>
      )}
    </div>
  );
};

// isNotFound reports an API answer of 404: the thing asked for does not exist, or is not of
// the organization (the API never says which).
export const isNotFound = (err: unknown) => err instanceof APIError && err.status === 404;

// NotFound is the page for an address that shows nothing: an unknown path, or a run or a
// workflow the API does not find. It says so and offers the way back.
export function NotFound({ what, back = "/workflows", backLabel = "Go to the workflows" }: { what?: string; back?: string; backLabel?: string }) {
  return (
    <section class="not-found" data-testid="not-found">
      <h1>Not found</h1>
      <p>{what ?? "There is no page at this address."} It may have been deleted, or belong to another organization, or the address may be mistyped.</p>
      <p><A href={back}>{backLabel}</A>{back !== "/workflows" && <> · <A href="/workflows">Workflows</A></>}</p>
    </section>
  );
}

// PageError is what a page shows when its main read failed: the not-found page for a 404,
// else the error in words with a way to try again.
export function PageError({ err, what, back, backLabel, retry }: { err: unknown; what?: string; back?: string; backLabel?: string; retry?: () => void }) {
  if (isNotFound(err)) return <NotFound what={what} back={back} backLabel={backLabel} />;
  return <div><ErrorBox err={err} />{retry && <button onClick={retry}>Try again</button>}</div>;
}

export const Json = ({ v }: { v: unknown }) => <pre class="json" tabIndex={0}>{v === undefined ? "—" : JSON.stringify(v, null, 2)}</pre>;
export const when = (t?: string | null) => (t ? new Date(t).toLocaleString() : "—");
export const Status = ({ s }: { s: string }) => <span class={`status s-${s}`} data-status={s}>{s}</span>;

// useLoad runs a loader and keeps its result, its error, and a reload.
export function useLoad<T>(load: () => Promise<T>, deps: unknown[]) {
  const [state, setState] = useState<{ data?: T; err?: unknown; loading: boolean }>({ loading: true });
  const [n, setN] = useState(0);
  useEffect(() => {
    let live = true;
    load().then((data) => live && setState({ data, loading: false }), (err) => live && setState({ err, loading: false }));
    return () => { live = false; };
  }, [...deps, n]);
  return { ...state, reload: () => setN((x) => x + 1) };
}

// useModel makes a model (lists.ts, follower.ts) when deps change, starts it while the page
// shows it, and renders the page each time it changes.
export function useModel<M extends Model>(make: (changed: () => void) => M, deps: unknown[]): M {
  const [, bump] = useState(0);
  const live = useRef(true);
  useEffect(() => () => { live.current = false; }, []);
  const m = useMemo(() => make(() => { if (live.current) bump((x) => x + 1); }), deps);
  useEffect(() => {
    m.start();
    return () => m.stop();
  }, [m]);
  return m;
}

// More is the end of a list: "Load more" while there is a next page.
export function More({ list, what }: { list: PagedList<any>; what: string }) {
  return (
    <div class="more">
      <ErrorBox err={list.moreErr} />
      {list.loaded && list.items.length > 0 && <span class="count" data-testid="count">{list.items.length} {list.items.length === 1 ? what.replace(/s$/, "") : what}{list.next ? " loaded" : ""}</span>}
      {list.next && <button onClick={() => list.more()} disabled={list.loadingMore}>{list.loadingMore ? "Loading…" : "Load more"}</button>}
    </div>
  );
}

// Failed is a list whose first page could not be read.
export const Failed = ({ list }: { list: PagedList<any> }) =>
  list.err ? <div><ErrorBox err={list.err} /><button onClick={() => list.retry()}>Try again</button></div> : null;


// parseJSON reads text a person typed as JSON. An empty text is `empty`; text that is not JSON
// throws an Error that says so in words, with the line and column where reading stopped.
export function parseJSON(text: string, what: string, empty: unknown = undefined): unknown {
  if (!text.trim()) return empty;
  try {
    return JSON.parse(text);
  } catch (x) {
    // Where reading stopped: found here, the same in every browser (their messages do not
    // always say it: "Unexpected token '}', … is not valid JSON").
    let at = jsonStop(text);
    if (at < 0) {
      const m = /position (\d+)/.exec(String((x as Error).message));
      at = m ? Number(m[1]) : -1;
    }
    if (at < 0) throw new Error(`${what} is not valid JSON.`);
    const before = text.slice(0, at), line = before.split("\n").length;
    const col = at - before.lastIndexOf("\n");
    throw new Error(`${what} is not valid JSON: reading stopped at line ${line}, column ${col}${at < text.length ? ` (at “${text.slice(at, at + 12)}”)` : " (the text ends too early)"}.`);
  }
}

// jsonStop is the offset in text where reading it as JSON (RFC 8259) fails, or -1 when it is
// JSON.
export function jsonStop(text: string): number {
  let i = 0;
  const fail = (): never => { throw i; };
  const ws = () => { while (i < text.length && " \t\n\r".includes(text[i])) i++; };
  const word = (w: string) => { for (const c of w) { if (text[i] !== c) fail(); i++; } };
  const str = () => {
    i++;
    for (;;) {
      if (i >= text.length) fail();
      const c = text[i];
      if (c === '"') { i++; return; }
      if (c < " ") fail();
      if (c !== "\\") { i++; continue; }
      i++;
      const e = text[i];
      if (e === "u") {
        for (let k = 1; k <= 4; k++) if (!/[0-9a-fA-F]/.test(text[i + k] ?? "")) { i += k; fail(); }
        i += 5;
      } else if (e !== undefined && '"\\/bfnrt'.includes(e)) i++;
      else fail();
    }
  };
  const num = () => {
    const m = /^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/.exec(text.slice(i));
    if (!m) fail();
    i += m![0].length;
  };
  const value = (): void => {
    ws();
    const c = text[i];
    if (c === "{") {
      i++; ws();
      if (text[i] === "}") { i++; return; }
      for (;;) {
        ws();
        if (text[i] !== '"') fail();
        str(); ws();
        if (text[i] !== ":") fail();
        i++; value(); ws();
        if (text[i] === ",") { i++; continue; }
        if (text[i] === "}") { i++; return; }
        fail();
      }
    }
    if (c === "[") {
      i++; ws();
      if (text[i] === "]") { i++; return; }
      for (;;) {
        value(); ws();
        if (text[i] === ",") { i++; continue; }
        if (text[i] === "]") { i++; return; }
        fail();
      }
    }
    if (c === '"') return str();
    if (c === "t") return word("true");
    if (c === "f") return word("false");
    if (c === "n") return word("null");
    if (c === "-" || (c >= "0" && c <= "9")) return num();
    fail();
  };
  try {
    value(); ws();
    if (i < text.length) fail();
    return -1;
  } catch (at) {
    if (typeof at === "number") return at;
    return -1; // too deep for the stack: the browser's message decides
  }
}
