"use client";

import { memo, type ReactNode, useCallback, useId, useMemo } from "react";
import { Button, cx, inputClass } from "@/components/ui";
import {
  emptyItem,
  type Field,
  type FieldProblem,
  type FormValue,
  type ItemField,
  type JsonField,
  type ListField,
  type ObjectField,
  replaceAt,
} from "@/lib/schema-form";

type ChangeAt = (index: number, value: FormValue) => void;
/** Messages of problems with something entered, by field key; a missing value is said below the form instead. */
type Inline = ReadonlyMap<string, string>;

/**
 * The fields of a tool's input schema (lib/schema-form.ts) as controls: one per property, labelled
 * with its name (and title), its type and a required mark, its description as a plain-text hint.
 * `values` holds one value per field; `onChangeAt(index, value)` replaces one, and should be
 * stable (a state setter's functional update) so that typing in one of hundreds of fields
 * re-renders that field only. Every text a server wrote is rendered as React text, never as HTML.
 */
export function SchemaForm({
  fields,
  values,
  onChangeAt,
  problems,
}: {
  fields: readonly Field[];
  values: readonly FormValue[];
  onChangeAt: ChangeAt;
  problems: readonly FieldProblem[];
}) {
  const inline = useInline(problems);
  return (
    <div className="space-y-4">
      {fields.map((field, i) => (
        <FieldRow
          key={field.key}
          field={field}
          value={values[i] ?? null}
          index={i}
          onChangeAt={onChangeAt}
          inline={inline}
          problem={inline.get(field.key)}
        />
      ))}
    </div>
  );
}

/** Kept equal while the messages are, so that memoised rows are not re-rendered for nothing. */
function useInline(problems: readonly FieldProblem[]): Inline {
  const signature = problems
    .filter((p) => !p.missing)
    .map((p) => `${p.key}\u0000${p.message}`)
    .join("\u0001");
  // biome-ignore lint/correctness/useExhaustiveDependencies: the signature stands for the problems.
  return useMemo(
    () => new Map(problems.filter((p) => !p.missing).map((p) => [p.key, p.message])),
    [signature],
  );
}

const FieldRow = memo(function FieldRow({
  field,
  value,
  index,
  onChangeAt,
  inline,
  problem,
}: {
  field: Field;
  value: FormValue;
  index: number;
  onChangeAt: ChangeAt;
  inline: Inline;
  /** This field's own message (for an object or list: only a whole-list one), passed for memo's sake. */
  problem: string | undefined;
}) {
  const onValue = useCallback((next: FormValue) => onChangeAt(index, next), [onChangeAt, index]);
  switch (field.kind) {
    case "object":
      return <ObjectControl field={field} value={value} onValue={onValue} inline={inline} />;
    case "list":
      return <ListControl field={field} value={value} onValue={onValue} inline={inline} problem={problem} />;
    default:
      return <LeafRow field={field} value={value} onValue={onValue} problem={problem} />;
  }
});

function FieldName({ field }: { field: Field }) {
  return (
    <>
      <span className="font-mono">{field.name}</span>
      {field.title ? (
        <>
          {" "}
          <span className="font-normal text-zinc-600">{field.title}</span>
        </>
      ) : null}
    </>
  );
}

function TypeAndRequired({ field, id }: { field: Field; id: string }) {
  return (
    <span id={id} className="inline-flex flex-wrap items-baseline gap-x-2">
      <span className="font-mono text-xs text-zinc-500">{field.typeLabel}</span>
      {field.required ? <span className="text-xs font-medium text-rose-700">required</span> : null}
    </span>
  );
}

/** A description as a hint: plain text, three lines at most, all of it in the tooltip. */
function Hint({ id, children }: { id: string; children: string }) {
  return (
    <p
      id={id}
      title={children}
      className="line-clamp-3 whitespace-pre-line text-xs text-zinc-500 wrap-anywhere"
    >
      {children}
    </p>
  );
}

function InlineProblem({ id, children }: { id: string; children: ReactNode }) {
  return (
    <p id={id} className="text-xs font-medium text-rose-700 wrap-anywhere">
      {children}
    </p>
  );
}

function describedBy(...ids: (string | false | null | undefined)[]): string | undefined {
  const list = ids.filter(Boolean);
  return list.length > 0 ? list.join(" ") : undefined;
}

function LeafRow({
  field,
  value,
  onValue,
  problem,
}: {
  field: ItemField | JsonField;
  value: FormValue;
  onValue: (value: FormValue) => void;
  problem: string | undefined;
}) {
  const id = useId();
  const ids = { type: `${id}-type`, hint: `${id}-hint`, reason: `${id}-reason`, problem: `${id}-problem` };
  const described = describedBy(
    ids.type,
    field.description && ids.hint,
    field.kind === "json" && ids.reason,
    problem && ids.problem,
  );
  const checkbox = field.kind === "boolean" && field.required;
  const label = (
    <label htmlFor={id} className="min-w-0 text-sm font-medium text-zinc-800 wrap-anywhere">
      <FieldName field={field} />
    </label>
  );
  return (
    <div className="min-w-0 space-y-1">
      <div className="flex flex-wrap items-baseline gap-x-2 gap-y-0.5">
        {checkbox ? (
          <LeafControl
            id={id}
            field={field}
            value={value}
            onValue={onValue}
            described={described}
            invalid={!!problem}
          />
        ) : null}
        {label}
        <TypeAndRequired field={field} id={ids.type} />
      </div>
      {checkbox ? null : (
        <LeafControl
          id={id}
          field={field}
          value={value}
          onValue={onValue}
          described={described}
          invalid={!!problem}
        />
      )}
      {field.description ? <Hint id={ids.hint}>{field.description}</Hint> : null}
      {field.kind === "json" ? (
        <p id={ids.reason} className="text-xs text-zinc-500">
          Written as JSON: {field.reason}.
        </p>
      ) : null}
      {problem ? <InlineProblem id={ids.problem}>{problem}</InlineProblem> : null}
    </div>
  );
}

/** The input for one value; `id` ties it to its label, or `label` names it (a list item). */
function LeafControl({
  id,
  field,
  value,
  onValue,
  described,
  invalid,
  label,
}: {
  id?: string;
  field: ItemField | JsonField;
  value: FormValue;
  onValue: (value: FormValue) => void;
  described?: string;
  invalid: boolean;
  label?: string;
}) {
  const common = {
    id,
    "aria-label": label,
    "aria-describedby": described,
    "aria-invalid": invalid || undefined,
    "aria-required": field.required || undefined,
  };
  const text = typeof value === "string" ? value : "";
  switch (field.kind) {
    case "text":
      return (
        <input
          {...common}
          type={field.inputType}
          value={text}
          onChange={(e) => onValue(e.target.value)}
          // No maxLength attribute: browsers count UTF-16 units, the schema counts characters
          // (code points), and the form's own check says when the text is too long.
          autoComplete="off"
          spellCheck={false}
          className={inputClass}
        />
      );
    case "number":
      return (
        <input
          {...common}
          // Text, not type="number": a number input reports "" for what it cannot parse ("1e"),
          // which would read as "fill in" instead of the form's "must be a number".
          type="text"
          inputMode={field.integer ? "numeric" : "decimal"}
          autoComplete="off"
          spellCheck={false}
          value={text}
          onChange={(e) => onValue(e.target.value)}
          className={inputClass}
        />
      );
    case "boolean":
      if (field.required) {
        return (
          <input
            {...common}
            type="checkbox"
            checked={value === true}
            onChange={(e) => onValue(e.target.checked)}
            className="size-4 shrink-0 self-center rounded border-zinc-300 accent-indigo-600"
          />
        );
      }
      return (
        <select
          {...common}
          value={value === true ? "true" : value === false ? "false" : ""}
          onChange={(e) => onValue(e.target.value === "" ? null : e.target.value === "true")}
          className={inputClass}
        >
          <option value="">Not sent</option>
          <option value="true">true</option>
          <option value="false">false</option>
        </select>
      );
    case "select":
      return (
        <select
          {...common}
          value={typeof value === "number" ? String(value) : ""}
          onChange={(e) => onValue(e.target.value === "" ? null : Number(e.target.value))}
          className={inputClass}
        >
          <option value="">Choose…</option>
          {field.options.map((option, i) => (
            // biome-ignore lint/suspicious/noArrayIndexKey: options are listed once and never reordered.
            <option key={i} value={String(i)}>
              {option.label}
            </option>
          ))}
        </select>
      );
    case "json":
      return (
        <textarea
          {...common}
          value={text}
          onChange={(e) => onValue(e.target.value)}
          rows={3}
          spellCheck={false}
          className={cx(inputClass, "font-mono text-xs")}
        />
      );
  }
}

function Legend({ field, typeId }: { field: Field; typeId: string }) {
  return (
    <legend className="float-left flex w-full flex-wrap items-baseline gap-x-2 gap-y-0.5 text-sm font-medium text-zinc-800">
      <span className="min-w-0 wrap-anywhere">
        <FieldName field={field} />
      </span>
      <TypeAndRequired field={field} id={typeId} />
    </legend>
  );
}

function ObjectControl({
  field,
  value,
  onValue,
  inline,
}: {
  field: ObjectField;
  value: FormValue;
  onValue: (value: FormValue) => void;
  inline: Inline;
}) {
  const id = useId();
  const values = Array.isArray(value) ? value : [];
  const onChangeAt = useCallback<ChangeAt>(
    (i, next) => onValue(replaceAt(values, i, next)),
    [onValue, values],
  );
  return (
    <fieldset
      className="min-w-0 space-y-3 rounded-md border border-zinc-200 p-3"
      aria-describedby={field.description ? `${id}-hint` : undefined}
    >
      <Legend field={field} typeId={`${id}-type`} />
      {field.description ? (
        <div className="clear-left">
          <Hint id={`${id}-hint`}>{field.description}</Hint>
        </div>
      ) : null}
      <div className="clear-left space-y-4">
        {field.fields.map((child, i) => (
          <FieldRow
            key={child.key}
            field={child}
            value={values[i] ?? null}
            index={i}
            onChangeAt={onChangeAt}
            inline={inline}
            problem={inline.get(child.key)}
          />
        ))}
      </div>
    </fieldset>
  );
}

function ListControl({
  field,
  value,
  onValue,
  inline,
  problem,
}: {
  field: ListField;
  value: FormValue;
  onValue: (value: FormValue) => void;
  inline: Inline;
  problem: string | undefined;
}) {
  const id = useId();
  const items = Array.isArray(value) ? value : [];
  const full = field.maxItems !== null && items.length >= field.maxItems;
  return (
    <fieldset
      className="min-w-0 space-y-2 rounded-md border border-zinc-200 p-3"
      aria-describedby={describedBy(field.description && `${id}-hint`, problem && `${id}-problem`)}
    >
      <Legend field={field} typeId={`${id}-type`} />
      {field.description ? (
        <div className="clear-left">
          <Hint id={`${id}-hint`}>{field.description}</Hint>
        </div>
      ) : null}
      {items.length === 0 ? <p className="clear-left text-xs text-zinc-500">No items.</p> : null}
      {items.length > 0 ? (
        <ol className="clear-left space-y-2">
          {items.map((item, i) => {
            const label = `${field.path} item ${i + 1}`;
            const itemProblem = inline.get(`${field.key}#${i}`);
            return (
              // biome-ignore lint/suspicious/noArrayIndexKey: an item is its position; its value is what it holds.
              <li key={i} className="space-y-1">
                <div className="flex items-center gap-2">
                  <div className="min-w-0 flex-1">
                    <LeafControl
                      field={field.item}
                      value={item}
                      onValue={(next) => onValue(replaceAt(items, i, next))}
                      invalid={!!itemProblem}
                      label={label}
                      described={itemProblem ? `${id}-problem-${i}` : undefined}
                    />
                  </div>
                  <Button
                    aria-label={`Remove ${label}`}
                    onClick={() => onValue(items.filter((_, j) => j !== i))}
                  >
                    Remove
                  </Button>
                </div>
                {itemProblem ? <InlineProblem id={`${id}-problem-${i}`}>{itemProblem}</InlineProblem> : null}
              </li>
            );
          })}
        </ol>
      ) : null}
      <div className="clear-left">
        <Button
          aria-label={`Add item to ${field.path}`}
          onClick={() => onValue([...items, emptyItem(field)])}
          disabled={full}
        >
          Add item
        </Button>
      </div>
      {problem ? <InlineProblem id={`${id}-problem`}>{problem}</InlineProblem> : null}
    </fieldset>
  );
}
