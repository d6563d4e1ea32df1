/**
 * The before/after of a changed tool: what changed in a line, the description as a word diff,
 * schema changes path by path, annotation flips called out. Everything from the tool server is
 * rendered as React text (never HTML), hidden characters made visible.
 */
import type { ReactNode } from "react";
import { Badge } from "@/components/ui";
import { VisibleText } from "@/components/visible-text";
import type {
  AnnotationFlip,
  SchemaChange,
  TextDiffPart,
  ToolChangeView,
  ToolIconView,
} from "@/lib/api-types";
import { prettyJson } from "@/lib/format";

/** Schema changes shown per schema before "and N more". */
const SCHEMA_ROWS = 100;
/** Longest JSON value shown in a schema change cell before it scrolls. */
const VALUE_MAX_CHARS = 4_000;

export function DefinitionDiffView({ change }: { change: ToolChangeView }) {
  const { diff, before, after } = change;
  if (!diff || !before) {
    return (
      <div className="space-y-2 text-sm">
        <p className="text-zinc-700">
          The definition this tool was enabled with was not kept (it was enabled before Gatehouse kept
          definitions), so there is no before/after. This is the definition its server lists now:
        </p>
        <JsonBlock value={after} />
      </div>
    );
  }
  return (
    <div className="space-y-4 text-sm">
      <div>
        <h4 className="sr-only">What changed</h4>
        <ul className="flex flex-wrap gap-1.5" aria-label="What changed">
          {diff.summary.map((item) => {
            const flip = diff.annotations.find((f) => f.text === item);
            return (
              <li key={item}>
                <Badge
                  tone={flip?.riskier ? "red" : "amber"}
                  title={flip?.riskier ? "riskier than before" : undefined}
                >
                  {flip?.riskier ? `⚠ ${item}` : item}
                </Badge>
              </li>
            );
          })}
        </ul>
      </div>

      {diff.annotations.length > 0 ? <AnnotationFlips flips={diff.annotations} /> : null}

      {diff.name ? (
        <Section title="Name">
          <p className="font-mono text-[0.8125rem]">
            <del className="bg-rose-100 text-rose-900">
              <VisibleText text={diff.name.before} />
            </del>{" "}
            →{" "}
            <ins className="bg-emerald-100 text-emerald-900 no-underline">
              <VisibleText text={diff.name.after} />
            </ins>
          </p>
        </Section>
      ) : null}

      {diff.title ? (
        <Section title="Title">
          <p>
            <Before text={diff.title.before} /> → <After text={diff.title.after} />
          </p>
        </Section>
      ) : null}

      {diff.icons ? (
        <Section title="Icons">
          <p className="flex flex-wrap items-center gap-2">
            <ToolIcons icons={before.icons} /> → <ToolIcons icons={after.icons} />
          </p>
        </Section>
      ) : null}

      {diff.description ? (
        <Section title="Description">
          <TextDiff parts={diff.description} />
        </Section>
      ) : null}

      {diff.inputSchema.length > 0 ? (
        <Section title="Input schema">
          <SchemaChanges changes={diff.inputSchema} label="Input schema changes" />
        </Section>
      ) : null}
      {diff.outputSchema.length > 0 ? (
        <Section title="Output schema">
          <SchemaChanges changes={diff.outputSchema} label="Output schema changes" />
        </Section>
      ) : null}
    </div>
  );
}

function Before({ text }: { text: string | null }) {
  if (text === null) return <Absent />;
  return (
    <del className="bg-rose-100 text-rose-900">
      <VisibleText text={text} />
    </del>
  );
}

function After({ text }: { text: string | null }) {
  if (text === null) return <Absent />;
  return (
    <ins className="bg-emerald-100 text-emerald-900 no-underline">
      <VisibleText text={text} />
    </ins>
  );
}

/**
 * A tool's icons at 24 px. Their `src` is always a `data:` URI of a raster image (the catalogue
 * lets nothing else through), so showing them fetches nothing from a tool server; an `<img>`
 * runs no script whatever the bytes are.
 */
export function ToolIcons({ icons }: { icons: ToolIconView[] | undefined }) {
  if (!icons || icons.length === 0) return <span className="text-zinc-400">(no icons)</span>;
  return (
    <span className="inline-flex gap-1.5">
      {icons.map((icon, i) => (
        // biome-ignore lint/performance/noImgElement: a data: URI; next/image would only pass it through.
        <img
          // biome-ignore lint/suspicious/noArrayIndexKey: the server's order, which does not change here.
          key={i}
          src={icon.src}
          alt={icon.sizes ? `icon ${icon.sizes.join(" ")}` : "icon"}
          width={24}
          height={24}
          className="size-6 rounded border border-zinc-200 bg-white object-contain"
        />
      ))}
    </span>
  );
}

function Section({ title, children }: { title: string; children: ReactNode }) {
  return (
    <section aria-label={title} className="space-y-1.5">
      <h4 className="text-xs font-semibold uppercase tracking-wide text-zinc-500">{title}</h4>
      {children}
    </section>
  );
}

function AnnotationFlips({ flips }: { flips: AnnotationFlip[] }) {
  return (
    <Section title="Annotations">
      <ul className="space-y-1">
        {flips.map((flip) => (
          <li
            key={flip.key}
            className={
              flip.riskier
                ? "rounded-md border border-rose-200 bg-rose-50 px-2 py-1 font-mono text-[0.8125rem] text-rose-900"
                : "rounded-md border border-zinc-200 bg-zinc-50 px-2 py-1 font-mono text-[0.8125rem] text-zinc-800"
            }
          >
            <VisibleText text={flip.text} />
            {flip.riskier ? <span className="ml-2 font-sans text-xs font-semibold">riskier</span> : null}
          </li>
        ))}
      </ul>
    </Section>
  );
}

/** Removed text struck through on red, added text on green, the rest plain; line breaks kept. */
export function TextDiff({ parts }: { parts: TextDiffPart[] }) {
  return (
    <p
      data-testid="description-diff"
      className="max-h-80 overflow-auto whitespace-pre-wrap break-words rounded-md border border-zinc-200 bg-white p-2 leading-relaxed text-zinc-800"
    >
      {parts.map((part, i) =>
        part.op === "removed" ? (
          // biome-ignore lint/suspicious/noArrayIndexKey: a diff's parts never reorder.
          <del key={i} className="rounded-sm bg-rose-100 text-rose-900" title="removed">
            <VisibleText text={part.text} />
          </del>
        ) : part.op === "added" ? (
          // biome-ignore lint/suspicious/noArrayIndexKey: a diff's parts never reorder.
          <ins key={i} className="rounded-sm bg-emerald-100 text-emerald-900 no-underline" title="added">
            <VisibleText text={part.text} />
          </ins>
        ) : (
          // biome-ignore lint/suspicious/noArrayIndexKey: a diff's parts never reorder.
          <span key={i}>
            <VisibleText text={part.text} />
          </span>
        ),
      )}
    </p>
  );
}

const kindTone = { added: "green", removed: "red", changed: "amber" } as const;

function SchemaChanges({ changes, label }: { changes: SchemaChange[]; label: string }) {
  const shown = changes.slice(0, SCHEMA_ROWS);
  return (
    <div className="overflow-x-auto rounded-md border border-zinc-200">
      <table aria-label={label} className="w-full table-fixed text-left text-[0.8125rem]">
        <colgroup>
          <col className="w-[14rem]" />
          <col className="w-[6rem]" />
          <col />
          <col />
        </colgroup>
        <thead className="bg-zinc-50 text-xs uppercase tracking-wide text-zinc-500">
          <tr>
            <th scope="col" className="px-2 py-1 font-semibold">
              Path
            </th>
            <th scope="col" className="px-2 py-1 font-semibold">
              Change
            </th>
            <th scope="col" className="px-2 py-1 font-semibold">
              Before
            </th>
            <th scope="col" className="px-2 py-1 font-semibold">
              After
            </th>
          </tr>
        </thead>
        <tbody className="divide-y divide-zinc-100">
          {shown.map((c, i) => (
            // biome-ignore lint/suspicious/noArrayIndexKey: paths can repeat only across kinds; order is fixed.
            <tr key={i} className="align-top">
              <td className="break-all px-2 py-1 font-mono text-zinc-900">
                {c.path === "" ? (
                  <span className="text-zinc-500">(whole schema)</span>
                ) : (
                  <VisibleText text={c.path} />
                )}
              </td>
              <td className="px-2 py-1">
                <Badge tone={kindTone[c.kind]}>{c.kind}</Badge>
              </td>
              <td className="px-2 py-1">{"before" in c ? <JsonValue value={c.before} /> : <Absent />}</td>
              <td className="px-2 py-1">{"after" in c ? <JsonValue value={c.after} /> : <Absent />}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {changes.length > shown.length ? (
        <p className="border-t border-zinc-100 px-2 py-1 text-xs text-zinc-500">
          and {changes.length - shown.length} more changes not shown
        </p>
      ) : null}
    </div>
  );
}

function Absent() {
  return <span className="text-zinc-400">—</span>;
}

function JsonValue({ value }: { value: unknown }) {
  const text = prettyJson(value);
  const cut = text.length > VALUE_MAX_CHARS ? `${text.slice(0, VALUE_MAX_CHARS)}\n…` : text;
  return (
    <pre className="max-h-40 overflow-auto whitespace-pre-wrap break-all font-mono text-[0.75rem] text-zinc-800">
      <VisibleText text={cut} />
    </pre>
  );
}

export function JsonBlock({ value }: { value: unknown }) {
  return (
    <pre className="max-h-72 overflow-auto whitespace-pre-wrap break-all rounded-md border border-zinc-200 bg-zinc-50 p-2 font-mono text-[0.75rem] text-zinc-800">
      <VisibleText text={prettyJson(value)} />
    </pre>
  );
}
