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

// sentence ends a message with a full stop, so that another sentence can follow it.
export const sentence = (m: string) => (/[.!?]$/.test(m) ? m : m + ".");

export const ErrorBox = ({ err }: { err: unknown }) =>
  err ? (
    <p class="error" role="alert">
      {err instanceof APIError
        ? <><code>{err.code}</code> {err.message !== err.code ? (err.retryAfterMs ? sentence(err.message) : err.message) : ""}{err.retryAfterMs ? ` Try again in ${Math.ceil(err.retryAfterMs / 1000)} s.` : ""}</>
        : String(err)}
    </p>
  ) : null;

export const Json = ({ v }: { v: unknown }) => <pre class="json">{v === undefined ? "—" : JSON.stringify(v, null, 2)}</pre>;
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
    const m = /position (\d+)/.exec(String((x as Error).message));
    if (!m) throw new Error(`${what} is not valid JSON.`);
    const at = Number(m[1]), before = text.slice(0, at), line = before.split("\n").length;
    const col = at - before.lastIndexOf("\n");
    throw new Error(`${what} is not valid JSON: reading stopped at line ${line}, column ${col}${at < text.length ? ` (at “${text.slice(at, at + 12)}”)` : " (the text ends too early)"}.`);
  }
}
