/**
 * The signed-in person as the approval pages need them: who they are and what the approval
 * policy lets them do with calls they requested themselves. Pages build it on the server
 * (`pageViewer` in server/http/page.ts) at each render, so a reviewer added elsewhere counts on
 * the next navigation.
 */
export interface Viewer {
  name: string;
  /**
   * Names of the agent tokens this person created: a call from one of those agents counts as
   * theirs for self-approval, as the API judges it.
   */
  agentTokens: string[];
  /** May add people (Settings → Users), so hints can link there. */
  owner: boolean;
  /** `approvals.selfApproval` of the config: a person may approve a one-reviewer call they requested. */
  selfApproval: boolean;
  /** People other than this one who may approve calls (reviewers and owners). */
  otherReviewers: number;
}

/** Where an owner adds a reviewer: the Add user form on Settings, with only the reviewer role ticked. */
export const ADD_REVIEWER_HREF = "/settings?add=reviewer#add-user";

/** Where the approval settings of the config are shown, with how to change them. */
export const APPROVAL_SETTINGS_HREF = "/settings#approval-settings";

/** Whether `viewer` counts as the person behind this call (they asked, or their agent did). */
export function requestedByViewer(
  call: { requester: { kind: "agent" | "user"; name: string } },
  viewer: Pick<Viewer, "name" | "agentTokens">,
): boolean {
  return call.requester.kind === "user"
    ? call.requester.name === viewer.name
    : viewer.agentTokens.includes(call.requester.name);
}

/**
 * Whether a call `viewer` requested cannot be approved by anyone yet: fewer other people may
 * approve than it needs, and self-approval does not let the viewer approve it (it is off, or the
 * call needs two approvals, or a rule held it, which self-approval never covers).
 */
export function waitsForAnotherReviewer(
  call: { approvalsNeeded: number; rule: string | null },
  viewer: Pick<Viewer, "selfApproval" | "otherReviewers">,
): boolean {
  const needed = call.approvalsNeeded >= 2 ? call.approvalsNeeded : 1;
  const selfApproves = viewer.selfApproval && call.approvalsNeeded < 2 && call.rule === null;
  return viewer.otherReviewers < needed && !selfApproves;
}
