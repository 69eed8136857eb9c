import type { Definition, ValidationError } from "./api";

const W = 170, H = 46, GX = 80, GY = 34, PAD = 20;

// Graph draws a definition as layered boxes: a block's layer is the longest path to it from a
// block without incoming edges; edges are labelled with their branch; a block with validation
// errors is outlined and lists them.
export function Graph({ def, errors }: { def: Definition; errors: ValidationError[] }) {
  const blocks = def.blocks || [], edges = def.edges || [];
  const layer = new Map<string, number>();
  for (const b of blocks) layer.set(b.block_id, 0);
  for (let i = 0; i < blocks.length; i++) {
    let changed = false;
    for (const e of edges) {
      const l = (layer.get(e.block_id) ?? 0) + 1;
      if (layer.has(e.target_block_id) && l > (layer.get(e.target_block_id) ?? 0)) {
        layer.set(e.target_block_id, l);
        changed = true;
      }
    }
    if (!changed) break;
  }
  const rows = new Map<number, number>();
  const pos = new Map<string, { x: number; y: number }>();
  for (const b of blocks) {
    const l = layer.get(b.block_id) ?? 0, r = rows.get(l) ?? 0;
    rows.set(l, r + 1);
    pos.set(b.block_id, { x: PAD + l * (W + GX), y: PAD + r * (H + GY) });
  }
  const width = PAD * 2 + (Math.max(0, ...layer.values()) + 1) * (W + GX) - GX;
  const height = PAD * 2 + Math.max(1, ...rows.values()) * (H + GY) - GY;
  const errs = (id: string) => errors.filter((e) => e.block_id === id);
  if (blocks.length === 0) {
    return <p class="empty">No blocks yet. Add some with <code>POST /api/workflows/:id/operations</code> or <code>svc ops apply</code>.</p>;
  }
  // A graph wider than its card is drawn smaller, down to 60% of its size (then the card scrolls).
  return (
    <svg class="graph" data-testid="graph" width={width} height={height} viewBox={`0 0 ${width} ${height}`}
      style={{ maxWidth: "100%", height: "auto", minWidth: `${Math.round(width * 0.6)}px` }}>
      <defs>
        <marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto">
          <path d="M0,0 L10,5 L0,10 z" fill="#667" />
        </marker>
      </defs>
      {edges.map((e) => {
        const a = pos.get(e.block_id), b = pos.get(e.target_block_id);
        if (!a || !b) return null;
        const x1 = a.x + W, y1 = a.y + H / 2, x2 = b.x, y2 = b.y + H / 2;
        return (
          <g class="edge" key={`${e.block_id}>${e.target_block_id}`}>
            <path d={`M${x1},${y1} C${x1 + GX / 2},${y1} ${x2 - GX / 2},${y2} ${x2},${y2}`} fill="none" stroke="#667" marker-end="url(#arrow)" />
            {e.branch && <text class={`branch branch-${e.branch}`} x={(x1 + x2) / 2} y={(y1 + y2) / 2 - 5} text-anchor="middle">{e.branch}</text>}
          </g>
        );
      })}
      {blocks.map((b) => {
        const p = pos.get(b.block_id)!, bad = errs(b.block_id);
        return (
          <g class={`block${bad.length ? " invalid" : ""}`} data-block={b.block_id} key={b.block_id} transform={`translate(${p.x},${p.y})`}>
            <title>{bad.map((e) => `${e.code}: ${e.message}`).join("\n") || b.type}</title>
            <rect width={W} height={H} rx="6" />
            <text x="10" y="19" class="bid">{b.block_id}</text>
            <text x="10" y="36" class="btype">{b.type}{bad.length ? ` ⚠ ${bad.map((e) => e.code).join(", ")}` : ""}</text>
          </g>
        );
      })}
    </svg>
  );
}
