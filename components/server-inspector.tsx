"use client";

import { useQuery } from "@tanstack/react-query";
import { useState } from "react";
import { ErrorAlert, Loading } from "@/components/ui";
import { endpoints } from "@/lib/endpoints";
import { errorWithCode } from "@/lib/format";
import { queryKeys } from "@/lib/query-keys";

/**
 * The owner's look into a ready server: its resources (with the text of one on request) and
 * its prompts. Nothing is fetched until a section is opened. All text is the server's and is
 * rendered as text.
 */
export function ServerInspector({ name }: { name: string }) {
  const [resourcesOpen, setResourcesOpen] = useState(false);
  const [promptsOpen, setPromptsOpen] = useState(false);
  return (
    <div className="flex flex-col gap-2">
      <details
        className="rounded-md border border-zinc-200 bg-zinc-50"
        onToggle={(e) => setResourcesOpen(e.currentTarget.open)}
      >
        <summary className="cursor-pointer select-none px-3 py-1.5 text-sm font-medium text-zinc-700">
          Resources
        </summary>
        <div className="border-t border-zinc-200 px-3 py-2 text-sm">
          {resourcesOpen ? <ResourceList name={name} /> : null}
        </div>
      </details>
      <details
        className="rounded-md border border-zinc-200 bg-zinc-50"
        onToggle={(e) => setPromptsOpen(e.currentTarget.open)}
      >
        <summary className="cursor-pointer select-none px-3 py-1.5 text-sm font-medium text-zinc-700">
          Prompts
        </summary>
        <div className="border-t border-zinc-200 px-3 py-2 text-sm">
          {promptsOpen ? <PromptList name={name} /> : null}
        </div>
      </details>
    </div>
  );
}

function ResourceList({ name }: { name: string }) {
  const [selected, setSelected] = useState<string | null>(null);
  const query = useQuery({
    queryKey: queryKeys.servers.resources(name),
    queryFn: ({ signal }) => endpoints.servers.resources(name, { signal }),
  });
  if (query.isPending) return <Loading label="Loading resources…" />;
  if (query.isError) return <ErrorAlert>Could not list resources: {errorWithCode(query.error)}</ErrorAlert>;
  if (!query.data.supported) return <p className="text-zinc-500">This server offers no resources.</p>;
  if (query.data.resources.length === 0)
    return <p className="text-zinc-500">The server lists no resources.</p>;
  return (
    <div className="flex flex-col gap-2">
      <ul className="max-h-64 divide-y divide-zinc-200 overflow-auto">
        {query.data.resources.map((r) => (
          <li key={r.uri} className="py-1">
            <button
              type="button"
              className="text-left text-indigo-700 hover:underline"
              onClick={() => setSelected(r.uri)}
              aria-label={`Read ${r.name || r.uri}`}
            >
              <span className="font-medium">{r.name || r.uri}</span>
            </button>
            <span className="ml-2 break-all font-mono text-xs text-zinc-500">{r.uri}</span>
            {r.mimeType ? <span className="ml-2 text-xs text-zinc-500">{r.mimeType}</span> : null}
            {r.description ? <p className="text-xs text-zinc-600">{r.description}</p> : null}
          </li>
        ))}
      </ul>
      {selected ? <ResourceText name={name} uri={selected} /> : null}
    </div>
  );
}

function ResourceText({ name, uri }: { name: string; uri: string }) {
  const query = useQuery({
    queryKey: queryKeys.servers.resource(name, uri),
    queryFn: ({ signal }) => endpoints.servers.readResource(name, uri, { signal }),
  });
  if (query.isPending) return <Loading label="Reading…" />;
  if (query.isError)
    return (
      <ErrorAlert>
        Could not read {uri}: {errorWithCode(query.error)}
      </ErrorAlert>
    );
  return (
    <section className="flex flex-col gap-2" aria-label={`Contents of ${uri}`}>
      {query.data.contents.map((c, i) =>
        c.text !== null ? (
          // biome-ignore lint/suspicious/noArrayIndexKey: parts of one resource, in the server's order.
          <div key={i}>
            <pre className="max-h-64 overflow-auto whitespace-pre-wrap break-all rounded bg-white p-2 font-mono text-xs ring-1 ring-zinc-200">
              {c.text}
            </pre>
            {c.truncated ? (
              <p className="text-xs text-amber-700">Shortened: the resource is longer.</p>
            ) : null}
          </div>
        ) : (
          // biome-ignore lint/suspicious/noArrayIndexKey: parts of one resource, in the server's order.
          <p key={i} className="text-xs text-zinc-500">
            Binary content ({c.mimeType ?? "unknown type"}, about {c.binaryBytes ?? 0} bytes), not shown.
          </p>
        ),
      )}
    </section>
  );
}

function PromptList({ name }: { name: string }) {
  const query = useQuery({
    queryKey: queryKeys.servers.prompts(name),
    queryFn: ({ signal }) => endpoints.servers.prompts(name, { signal }),
  });
  if (query.isPending) return <Loading label="Loading prompts…" />;
  if (query.isError) return <ErrorAlert>Could not list prompts: {errorWithCode(query.error)}</ErrorAlert>;
  if (!query.data.supported) return <p className="text-zinc-500">This server offers no prompts.</p>;
  if (query.data.prompts.length === 0) return <p className="text-zinc-500">The server lists no prompts.</p>;
  return (
    <ul className="max-h-64 divide-y divide-zinc-200 overflow-auto">
      {query.data.prompts.map((p) => (
        <li key={p.name} className="py-1">
          <span className="font-mono font-medium">{p.name}</span>
          {p.arguments.length > 0 ? (
            <span className="ml-2 text-xs text-zinc-500">
              ({p.arguments.map((a) => `${a.name}${a.required ? "" : "?"}`).join(", ")})
            </span>
          ) : null}
          {p.description ? <p className="text-xs text-zinc-600">{p.description}</p> : null}
        </li>
      ))}
    </ul>
  );
}
