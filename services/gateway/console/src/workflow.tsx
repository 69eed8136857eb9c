import { useState } from "preact/hooks";
import { get, post, type Workflow } from "./api";
import { Graph } from "./graph";
import { A, ErrorBox, Json, navigate, useLoad } from "./ui";

export function WorkflowPage({ id }: { id: string }) {
  const wf = useLoad(() => get<Workflow>(`/api/workflows/${id}`), [id]);
  const [err, setErr] = useState<unknown>();
  const [input, setInput] = useState("{}");
  const start = async () => {
    setErr(undefined);
    try {
      const r = await post<{ runId: string }>(`/api/workflows/${id}/run`, { input: JSON.parse(input || "{}") });
      navigate(`/runs/${r.runId}`);
    } catch (x) { setErr(x); }
  };
  if (wf.err) return <ErrorBox err={wf.err} />;
  if (!wf.data) return <p>Loading…</p>;
  const w = wf.data, verrs = w.validation_errors || [];
  return (
    <section>
      <h1>{w.name} <small>v{w.version} · <code>{w.id}</code></small></h1>
      {w.description && <p>{w.description}</p>}
      <div class="card">
        <Graph def={w.definition || { blocks: [], edges: [] }} errors={verrs} />
      </div>
      {verrs.length > 0 && (
        <div class="card">
          <h2>Validation errors</h2>
          <ul class="verrs">{verrs.map((e, i) => <li key={i}><code>{e.code}</code> {e.block_id && <b>{e.block_id}</b>}: {e.message}</li>)}</ul>
        </div>
      )}
      <div class="card">
        <h2>Start a run</h2>
        <textarea aria-label="Run input" rows={3} value={input} onInput={(e) => setInput((e.target as HTMLTextAreaElement).value)} />
        <button onClick={start} disabled={verrs.length > 0}>Start run</button> <A href={`/runs?workflowId=${w.id}`}>Runs of this workflow</A>
        {verrs.length > 0 && <p class="hint">Fix the validation errors above (<code>svc ops apply</code> or <code>POST /api/workflows/:id/operations</code>) to run it.</p>}
        <ErrorBox err={err} />
      </div>
      <details><summary>JSON</summary><Json v={w} /></details>
    </section>
  );
}

