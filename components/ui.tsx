/**
 * Plain building blocks shared by every page: neutral greys, one accent (indigo). No data
 * access here. Everything renders its children as React text, never as HTML.
 */
import type { ButtonHTMLAttributes, InputHTMLAttributes, ReactNode, Ref } from "react";

export function cx(...parts: (string | false | null | undefined)[]): string {
  return parts.filter(Boolean).join(" ");
}

type ButtonVariant = "primary" | "secondary" | "danger";

const buttonVariants: Record<ButtonVariant, string> = {
  primary: "bg-indigo-600 text-white hover:bg-indigo-500 focus-visible:outline-indigo-600",
  secondary:
    "bg-white text-zinc-800 ring-1 ring-inset ring-zinc-300 hover:bg-zinc-50 focus-visible:outline-indigo-600",
  danger:
    "bg-white text-rose-700 ring-1 ring-inset ring-rose-300 hover:bg-rose-50 focus-visible:outline-rose-600",
};

export function Button({
  variant = "secondary",
  className,
  type = "button",
  ...props
}: ButtonHTMLAttributes<HTMLButtonElement> & { variant?: ButtonVariant }) {
  return (
    <button
      type={type}
      className={cx(
        "inline-flex items-center justify-center gap-1 rounded-md px-3 py-1.5 text-sm font-medium shadow-xs",
        "focus-visible:outline-2 focus-visible:outline-offset-2 disabled:cursor-not-allowed disabled:opacity-50",
        buttonVariants[variant],
        className,
      )}
      {...props}
    />
  );
}

export type BadgeTone = "grey" | "green" | "amber" | "red" | "blue" | "violet" | "slate";

const badgeTones: Record<BadgeTone, string> = {
  grey: "bg-zinc-100 text-zinc-700 ring-zinc-300",
  slate: "bg-slate-700 text-white ring-slate-700",
  green: "bg-emerald-50 text-emerald-800 ring-emerald-300",
  amber: "bg-amber-50 text-amber-800 ring-amber-300",
  red: "bg-rose-50 text-rose-800 ring-rose-300",
  blue: "bg-sky-50 text-sky-800 ring-sky-300",
  violet: "bg-violet-50 text-violet-800 ring-violet-300",
};

export function Badge({
  tone = "grey",
  children,
  title,
}: {
  tone?: BadgeTone;
  children: ReactNode;
  title?: string;
}) {
  return (
    <span
      title={title}
      className={cx(
        "inline-flex shrink-0 items-center whitespace-nowrap rounded-full px-2 py-0.5 text-xs font-medium ring-1 ring-inset",
        badgeTones[tone],
      )}
    >
      {children}
    </span>
  );
}

/** A visible error. Render it only when there is an error, so `role="alert"` means something. */
export function ErrorAlert({ children, className }: { children: ReactNode; className?: string }) {
  return (
    <div
      role="alert"
      className={cx(
        "rounded-md border border-rose-200 bg-rose-50 px-3 py-2 text-sm text-rose-800",
        className,
      )}
    >
      {children}
    </div>
  );
}

export function EmptyState({ title, children }: { title: string; children?: ReactNode }) {
  return (
    <div className="rounded-lg border border-dashed border-zinc-300 bg-white px-6 py-10 text-center">
      <p className="font-medium text-zinc-800">{title}</p>
      {children ? <div className="mt-1 text-sm text-zinc-500">{children}</div> : null}
    </div>
  );
}

export function Loading({ label }: { label: string }) {
  return (
    <p className="py-6 text-sm text-zinc-500" aria-live="polite">
      {label}
    </p>
  );
}

export function PageHeader({
  title,
  subtitle,
  actions,
}: {
  title: string;
  subtitle?: ReactNode;
  actions?: ReactNode;
}) {
  return (
    <div className="mb-6 flex flex-wrap items-end justify-between gap-3">
      <div className="min-w-0">
        <h1 className="text-xl font-semibold tracking-tight text-zinc-900">{title}</h1>
        {subtitle ? <p className="mt-1 text-sm text-zinc-500">{subtitle}</p> : null}
      </div>
      {actions}
    </div>
  );
}

export const inputClass =
  "block w-full rounded-md border-0 bg-white px-3 py-1.5 text-sm text-zinc-900 shadow-xs ring-1 ring-inset ring-zinc-300 placeholder:text-zinc-400 focus:ring-2 focus:ring-inset focus:ring-indigo-600";

/** A labelled input; the label is tied to the input by id, so `getByLabel(label)` finds it. */
export function TextField({
  id,
  label,
  hint,
  ...props
}: InputHTMLAttributes<HTMLInputElement> & {
  id: string;
  label: string;
  hint?: ReactNode;
  ref?: Ref<HTMLInputElement>;
}) {
  return (
    <div className="space-y-1">
      <label htmlFor={id} className="block text-sm font-medium text-zinc-700">
        {label}
      </label>
      <input id={id} className={inputClass} aria-describedby={hint ? `${id}-hint` : undefined} {...props} />
      {hint ? (
        <p id={`${id}-hint`} className="text-xs text-zinc-500">
          {hint}
        </p>
      ) : null}
    </div>
  );
}

export function Section({
  title,
  description,
  children,
}: {
  title: string;
  description?: ReactNode;
  children: ReactNode;
}) {
  return (
    <section aria-label={title} className="space-y-4">
      <div>
        <h2 className="text-lg font-semibold text-zinc-900">{title}</h2>
        {description ? <p className="mt-0.5 text-sm text-zinc-500">{description}</p> : null}
      </div>
      {children}
    </section>
  );
}

export const tableClass = "min-w-full divide-y divide-zinc-200 text-left text-sm";
export const thClass = "px-3 py-2 text-xs font-semibold uppercase tracking-wide text-zinc-500";
export const tdClass = "px-3 py-2 align-top";
