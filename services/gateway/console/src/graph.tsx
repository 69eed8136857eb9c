import type { Definition } from "./api";
import { BH, BW, layout } from "./layout";

// Graph draws a definition read-only (a run's pinned version), placed as the editor places it
// (layout.ts): top to bottom, edges labelled with their branch.
export function Graph({ def }: { def: Definition }) {
  const blocks = def.blocks || [], edges = def.edges || [];
  if (blocks.length === 0) return <p class="empty">No blocks.</p>;
  const L = layout(blocks.map((b) => b.block_id), edges.map((e) => ({ from: e.block_id, to: e.target_block_id })));
  // A graph wider than its card is drawn smaller, down to 60% of its size (then the card scrolls).
  return (
    <svg class="graph" data-testid="graph" width={L.width} height={L.height} viewBox={`0 0 ${L.width} ${L.height}`}
      style={{ maxWidth: "100%", height: "auto", minWidth: `${Math.round(L.width * 0.6)}px` }}>
      <defs>
        <marker id="arrow-ro" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto">
          <path d="M0,0 L10,5 L0,10 z" fill="#667" />
        </marker>
      </defs>
      {edges.map((e) => {
        const a = L.at.get(e.block_id), b = L.at.get(e.target_block_id);
        if (!a || !b) return null;
        const x1 = a.x + BW / 2, y1 = a.y + BH, x2 = b.x + BW / 2, y2 = b.y, dy = Math.max(30, (y2 - y1) / 2);
        return (
          <g class="edge" key={`${e.block_id}>${e.target_block_id}`}>
            <path d={`M${x1},${y1} C${x1},${y1 + dy} ${x2},${y2 - dy} ${x2},${y2}`} fill="none" stroke="#667" marker-end="url(#arrow-ro)" />
            {e.branch && <text class={`branch branch-${e.branch}`} x={(x1 + x2) / 2 + 6} y={(y1 + y2) / 2}>{e.branch}</text>}
          </g>
        );
      })}
      {blocks.map((b) => {
        const p = L.at.get(b.block_id)!;
        return (
          <g class="block" data-block={b.block_id} key={b.block_id} transform={`translate(${p.x},${p.y})`}>
            <title>{b.type}</title>
            <rect width={BW} height={BH} rx="6" />
            <text x="10" y="22" class="bid">{b.block_id}</text>
            <text x="10" y="40" class="btype">{b.type}</text>
          </g>
        );
      })}
    </svg>
  );
}
