/**
 * What a signed-in person reads on a page their roles do not cover (no redirect): the console's
 * 403 page, app/(console)/forbidden.tsx, says it.
 */
export function NotAllowed({ audience }: { audience: string }) {
  return (
    <div className="mx-auto max-w-lg rounded-lg border border-amber-200 bg-amber-50 px-6 py-8 text-center">
      <h1 className="text-lg font-semibold text-amber-900">Not allowed: this page is for {audience}</h1>
      <p className="mt-2 text-sm text-amber-800">
        Your account does not have that role. If you need this page, an owner of this Gatehouse can give you
        the role in Settings.
      </p>
    </div>
  );
}
