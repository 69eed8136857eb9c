// EditGraph draws a workflow for editing: blocks laid out top to bottom (layout.ts), each a
// button that selects it, with a handle below it that starts a connection; edges are buttons
// too, labelled with their branch. While a connection is being made, a click on a block ends
// it there. Every control is reachable with the keyboard (Tab, then Enter or Space). On SVG
// elements the attribute is written tabindex: Preact sets SVG attributes by the name given, and
// SVG attribute names are case-sensitive (a "tabIndex" attribute makes nothing focusable).

import type { Definition } from "./api";
import { BH, BW, layout } from "./layout";
import type { Connector } from "./schema";
import { cut } from "./ui";

export type Selection = { kind: "block"; id: string } | { kind: "edge"; from: string; to: string } | null;

interface Props {
  def: Definition;
  cat: Map<string, Connector>;
  problems: Map<string, number>; // block id → how many problems it has
  selected: Selection;
  connecting: string | null;
  zoom: number;
  onSelect: (s: Selection) => void;
  onHandle: (id: string) => void;
  onTarget: (id: string) => void;
}

const activate = (f: () => void) => (e: KeyboardEvent) => {
  if (e.key === "Enter" || e.key === " ") { e.preventDefault(); e.stopPropagation(); f(); }
};

export function EditGraph({ def, cat, problems, selected, connecting, zoom, onSelect, onHandle, onTarget }: Props) {
  const blocks = def.blocks || [], edges = def.edges || [];
  const L = layout(blocks.map((b) => b.block_id), edges.map((e) => ({ from: e.block_id, to: e.target_block_id })));
  const click = (id: string) => (connecting ? onTarget(id) : onSelect({ kind: "block", id }));
  return (
    <svg class={`graph edit${connecting ? " connecting" : ""}`} width={L.width * zoom} height={L.height * zoom} viewBox={`0 0 ${L.width} ${L.height}`}
      role="group" aria-label={`Graph of ${blocks.length} blocks and ${edges.length} connections`} data-testid="edit-graph"
      onClick={(e) => { if (e.target === e.currentTarget && !connecting) onSelect(null); }}>
      <defs>
        <marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#8893b5" /></marker>
      </defs>
      {edges.map((e) => {
        const a = L.at.get(e.block_id), b = L.at.get(e.target_block_id);
        if (!a || !b) return null;
        const sx = a.x + BW / 2, sy = a.y + BH, tx = b.x + BW / 2, ty = b.y - 2, dy = Math.max(30, (ty - sy) / 2);
        const d = `M${sx},${sy} C${sx},${sy + dy} ${tx},${ty - dy} ${tx},${ty}`;
        const sel = selected?.kind === "edge" && selected.from === e.block_id && selected.to === e.target_block_id;
        const label = `Connection from ${e.block_id} to ${e.target_block_id}${e.branch ? `, branch ${e.branch}` : ""}`;
        return (
          <g key={`${e.block_id}>${e.target_block_id}`} class={`edge${sel ? " selected" : ""}`} tabindex={0} role="button" aria-label={label} aria-pressed={sel}
            data-edge={`${e.block_id}>${e.target_block_id}`}
            onClick={(ev) => { ev.stopPropagation(); onSelect({ kind: "edge", from: e.block_id, to: e.target_block_id }); }}
            onKeyDown={activate(() => onSelect({ kind: "edge", from: e.block_id, to: e.target_block_id }))}>
            <title>{label}</title>
            <path class="hit" d={d} />
            <path class="line" d={d} markerEnd="url(#arrow)" />
            {e.branch && <text class={`branch branch-${e.branch}`} x={(sx + tx) / 2 + 6} y={(sy + ty) / 2}>{e.branch}</text>}
          </g>
        );
      })}
      {blocks.map((b) => {
        const p = L.at.get(b.block_id)!, n = problems.get(b.block_id) || 0;
        const sel = selected?.kind === "block" && selected.id === b.block_id;
        const title = cat.get(b.type)?.title ?? b.type;
        // The accessible name starts with the text the box shows (its id and type).
        const shown = `${cut(b.block_id, 22)} ${cut(title, 26)}`;
        const label = `${shown}${cut(b.block_id, 22) !== b.block_id ? ` (${b.block_id})` : ""}${connecting ? `: connect ${connecting} to it` : n ? `, ${n} problem${n > 1 ? "s" : ""}` : ""}`;
        return (
          <g key={b.block_id} transform={`translate(${p.x},${p.y})`} class={`block${n ? " invalid" : ""}${sel ? " selected" : ""} cat-${cat.get(b.type)?.category ?? "unknown"}`}
            data-block={b.block_id}>
            <g class="body" tabindex={0} role="button" aria-label={label} aria-pressed={sel}
              onClick={(ev) => { ev.stopPropagation(); click(b.block_id); }} onKeyDown={activate(() => click(b.block_id))}>
              <rect width={BW} height={BH} rx="8" />
              {/* One text: its pieces read as "id title", as the accessible name begins. */}
              <text><tspan class="bid" x="12" y="22">{cut(b.block_id, 22)}</tspan> <tspan class="btype" x="12" y="40">{cut(title, 26)}</tspan></text>
            </g>
            {n > 0 && <g class="badge" aria-hidden="true"><circle cx={BW - 12} cy="12" r="9" /><text x={BW - 12} y="16" text-anchor="middle">{n}</text></g>}
            {!connecting && (
              <g class="handle" tabindex={0} role="button" aria-label={`Connect ${b.block_id} to another block`}
                onClick={(ev) => { ev.stopPropagation(); onHandle(b.block_id); }} onKeyDown={activate(() => onHandle(b.block_id))}>
                <title>{`Connect: click here, then the block that follows ${b.block_id}`}</title>
                <circle cx={BW / 2} cy={BH} r="7" />
                <text x={BW / 2} y={BH + 4} text-anchor="middle">+</text>
              </g>
            )}
          </g>
        );
      })}
    </svg>
  );
}
