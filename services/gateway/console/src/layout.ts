// layout places the blocks of a workflow for drawing, top to bottom: a block's row is the
// longest path to it from a block nothing leads into, so every edge points down; the blocks of
// a row are ordered to keep edges short and uncrossed (a few sweeps of the barycenter rule,
// each block moved to the mean position of its neighbours in the row before, then after);
// rows are centred. Linear in blocks and edges per sweep: a hundred blocks lay out at once.

export interface Box { x: number; y: number } // the top-left corner
export interface Layout { at: Map<string, Box>; width: number; height: number; rows: string[][] }

export const BW = 184, BH = 54, GAP_X = 40, GAP_Y = 46, PAD = 24;

export function layout(ids: string[], edges: { from: string; to: string }[]): Layout {
  const known = new Set(ids);
  const es = edges.filter((e) => known.has(e.from) && known.has(e.to) && e.from !== e.to);
  const out = new Map<string, string[]>(), into = new Map<string, string[]>();
  for (const id of ids) { out.set(id, []); into.set(id, []); }
  for (const e of es) { out.get(e.from)!.push(e.to); into.get(e.to)!.push(e.from); }

  // Rows: longest path, in topological order (Kahn). A block left over (a cycle, which the
  // editor refuses, so only from bad data) goes on the row after the last.
  const row = new Map<string, number>(), indeg = new Map(ids.map((id) => [id, into.get(id)!.length]));
  const queue = ids.filter((id) => indeg.get(id) === 0);
  for (const id of queue) row.set(id, 0);
  for (let i = 0; i < queue.length; i++) {
    const id = queue[i];
    for (const t of out.get(id)!) {
      row.set(t, Math.max(row.get(t) ?? 0, row.get(id)! + 1));
      indeg.set(t, indeg.get(t)! - 1);
      if (indeg.get(t) === 0) queue.push(t);
    }
  }
  let last = Math.max(-1, ...row.values());
  for (const id of ids) if (!row.has(id)) row.set(id, ++last);

  const rows: string[][] = [];
  for (const id of ids) (rows[row.get(id)!] ||= []).push(id);
  for (let r = 0; r < rows.length; r++) rows[r] ||= [];

  // Barycenter sweeps: down (by the rows above), then up (by the rows below).
  const pos = new Map<string, number>();
  const index = () => rows.forEach((rw) => rw.forEach((id, i) => pos.set(id, i)));
  index();
  const sortBy = (rw: string[], nbrs: Map<string, string[]>) => {
    const key = new Map(rw.map((id, i) => {
      const ns = nbrs.get(id)!;
      return [id, ns.length ? ns.reduce((s, n) => s + pos.get(n)!, 0) / ns.length : i];
    }));
    rw.sort((a, b) => key.get(a)! - key.get(b)!);
  };
  for (let sweep = 0; sweep < 4; sweep++) {
    for (let r = 1; r < rows.length; r++) { sortBy(rows[r], into); index(); }
    for (let r = rows.length - 2; r >= 0; r--) { sortBy(rows[r], out); index(); }
  }

  const widest = Math.max(1, ...rows.map((rw) => rw.length));
  const width = PAD * 2 + widest * BW + (widest - 1) * GAP_X;
  const at = new Map<string, Box>();
  rows.forEach((rw, r) => {
    const span = rw.length * BW + (rw.length - 1) * GAP_X;
    const x0 = (width - span) / 2;
    rw.forEach((id, i) => at.set(id, { x: x0 + i * (BW + GAP_X), y: PAD + r * (BH + GAP_Y) }));
  });
  const height = PAD * 2 + Math.max(1, rows.length) * BH + Math.max(0, rows.length - 1) * GAP_Y;
  return { at, width, height, rows };
}
