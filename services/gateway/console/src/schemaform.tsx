// SchemaForm is a form generated from a JSON Schema's fields (schema.ts): a connector's params
// or a trigger's input_schema. It holds texts (Raw), so what a person types stays as typed
// until the form is sent; problems show on the field they name, with the fixes offered.

import type { ComponentChildren } from "preact";
import { type Field, type Raw, type Ref, isChoice, oneOfRequired } from "./schema";

export interface FieldNote {
  message: string;
  fix?: ComponentChildren; // buttons that send a fix
}

interface Props {
  fields: Field[];
  raw: Raw;
  onRaw: (r: Raw) => void;
  idp: string; // prefix of the inputs' ids, unique on the page
  base: string; // the pointer of the object: "/params" or "/input"
  notes?: Map<string, FieldNote[]>; // by pointer: base + "/" + name
  refs?: Ref[]; // values a template may use; absent: no helper
  oneOf?: string[] | null;
}

const placeholder = (f: Field): string => {
  if (f.schema.default !== undefined) return `default ${JSON.stringify(f.schema.default)}`;
  switch (f.kind) {
    case "duration": return "like 90s, 10m or 1h30m";
    case "datetime": return "like 2026-12-01T09:00:00Z";
    case "expression": return "like input.n > 5";
    case "integer": case "number": {
      const { minimum: lo, maximum: hi } = f.schema;
      return lo !== undefined && hi !== undefined ? `${lo} to ${hi}` : lo !== undefined ? `at least ${lo}` : "";
    }
    case "json": return f.isSchema ? '{"type": "object", "properties": {…}}' : "JSON: a string needs quotes";
  }
  return "";
};

export function SchemaForm({ fields, raw, onRaw, idp, base, notes, refs, oneOf }: Props) {
  return (
    <div class="sform">
      {oneOf && <p class="hint">Set exactly one of {oneOf.map((n, i) => <span key={n}>{i > 0 && (i === oneOf.length - 1 ? " or " : ", ")}<b>{n}</b></span>)}.</p>}
      {fields.map((f) => (
        <FieldRow key={f.name} f={f} raw={raw} onRaw={onRaw} idp={idp} base={base} notes={notes} refs={refs} />
      ))}
    </div>
  );
}

function FieldRow({ f, raw, onRaw, idp, base, notes, refs }: { f: Field } & Omit<Props, "fields" | "oneOf">) {
  const id = `${idp}-${f.name}`, ptr = `${base}/${f.name}`;
  const mine = [...(notes?.get(ptr) || [])];
  // Problems deeper in the value (a pointer under this field's) show here too.
  notes?.forEach((ns, p) => { if (p.startsWith(ptr + "/") && f.kind !== "object") mine.push(...ns); });
  const set = (t: any) => onRaw({ ...raw, [f.name]: t });
  const text = raw[f.name] ?? "";
  if (f.kind === "object") {
    return (
      <fieldset class="field" data-field={f.name}>
        <legend>{f.title}{f.required && <Req />}</legend>
        {f.description && <small class="desc">{f.description}</small>}
        <SchemaForm fields={f.fields!} raw={text || {}} onRaw={set} idp={id} base={ptr} notes={notes} refs={refs} />
        <Notes notes={mine} />
      </fieldset>
    );
  }
  const invalid = mine.length > 0 ? "true" : undefined;
  const descId = f.description ? `${id}-desc` : undefined;
  // Where the cursor was when the field lost focus: a value picked from the helper goes there.
  const keepCaret = (e: FocusEvent) => { const el = e.target as HTMLInputElement; el.dataset.caret = String(el.selectionStart ?? el.value.length); };
  let input;
  // A choice field that holds something else (a template) is a line of text.
  const kind = (f.kind === "enum" || f.kind === "boolean") && !isChoice(f, text) ? "string" : f.kind;
  switch (kind) {
    case "enum":
      input = (
        <select id={id} value={text} aria-invalid={invalid} aria-describedby={descId} onChange={(e) => set((e.target as HTMLSelectElement).value)}>
          <option value="">{f.required ? "— choose —" : "— not set —"}</option>
          {f.choices!.map((c) => <option key={JSON.stringify(c)} value={JSON.stringify(c)}>{String(c)}</option>)}
        </select>
      );
      break;
    case "boolean":
      input = (
        <select id={id} value={text} aria-invalid={invalid} aria-describedby={descId} onChange={(e) => set((e.target as HTMLSelectElement).value)}>
          <option value="">— not set —</option><option value="true">yes</option><option value="false">no</option>
        </select>
      );
      break;
    case "expression": case "json":
      input = <textarea id={id} class="code" rows={f.kind === "json" ? 6 : 2} value={text} placeholder={placeholder(f)} aria-invalid={invalid} aria-describedby={descId}
        spellcheck={false} onBlur={keepCaret} onInput={(e) => set((e.target as HTMLTextAreaElement).value)} />;
      break;
    default:
      input = <input id={id} value={text} placeholder={placeholder(f)} aria-invalid={invalid} aria-describedby={descId} spellcheck={false} onBlur={keepCaret} onInput={(e) => set((e.target as HTMLInputElement).value)} />;
  }
  const helper = refs && refs.length > 0 && kind !== "enum" && kind !== "boolean";
  return (
    <div class={`field${invalid ? " invalid" : ""}`} data-field={f.name}>
      <label for={id}>{f.title}{f.required && <Req />} <code class="pname">{f.name}</code></label>
      <div class="input-row">
        {input}
        {helper && <RefPicker refs={refs!} label={`Insert a value into ${f.title}`} onPick={(r) => set(insertRef(id, text, r, kind))} />}
      </div>
      {f.description && <small class="desc" id={descId}>{f.description}</small>}
      <Notes notes={mine} />
    </div>
  );
}

const Req = () => <><span class="req" aria-hidden="true">*</span><span class="sr-only">(required)</span></>;

export const Notes = ({ notes }: { notes: FieldNote[] }) =>
  notes.length ? (
    <ul class="field-notes" role="alert">
      {notes.map((n, i) => <li key={i}>{n.message}{n.fix && <span class="fixes"> {n.fix}</span>}</li>)}
    </ul>
  ) : null;

// RefPicker lists the values a template may use, grouped by where they come from.
export function RefPicker({ refs, label, onPick }: { refs: Ref[]; label: string; onPick: (r: Ref) => void }) {
  const groups = new Map<string, Ref[]>();
  for (const r of refs) (groups.get(r.from) || groups.set(r.from, []).get(r.from)!).push(r);
  return (
    <select class="refs" aria-label={label} value="" onChange={(e) => {
      const s = e.target as HTMLSelectElement, r = refs[Number(s.value)];
      s.value = "";
      if (r) onPick(r);
    }}>
      <option value="">insert…</option>
      {[...groups].map(([from, rs]) => (
        <optgroup key={from} label={from}>
          {rs.map((r) => <option key={r.expr} value={refs.indexOf(r)}>{r.expr}{r.type ? ` (${r.type})` : ""}</option>)}
        </optgroup>
      ))}
    </select>
  );
}

// insertRef puts a reference into a field's text at the cursor (at the end when the field was
// not focused): bare in an expression, as {{ }} in a template, quoted in JSON when the text is
// empty (a template string).
function insertRef(id: string, text: string, r: Ref, kind: Field["kind"]): string {
  const piece = kind === "expression" ? r.expr : kind === "json" && !text.trim() ? `"{{ ${r.expr} }}"` : `{{ ${r.expr} }}`;
  const el = document.getElementById(id) as HTMLInputElement | HTMLTextAreaElement | null;
  const caret = el?.dataset.caret !== undefined ? Number(el.dataset.caret) : NaN;
  const at = Number.isInteger(caret) && caret >= 0 && caret <= text.length ? caret : text.length;
  return text.slice(0, at) + piece + text.slice(at);
}

export { oneOfRequired };
