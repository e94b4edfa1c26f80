// The route of the last completion, for the status bar. No `vscode` import: unit-tested
// under plain node.

export type RouteName = "local" | "remote" | "none";

export interface Route {
  route: RouteName;
  reasons: string[];
  confidence?: number;
  summary: string;
}

/** The server's synconfroute.status result. */
export interface ServerStatus {
  local_only: boolean;
  local: string;
  remote: string;
  policy: string;
  threshold: number;
  completions: number;
  routes: Record<RouteName, number>;
  accepted: number;
  last: string | null;
}

// "synconfroute: local (confident-and-valid, confidence -0.05)": the title of the inline
// item's command, and the `last` field of the status.
const SUMMARY = /^synconfroute: (local|remote|none) \((.*)\)$/;
const CONFIDENCE = /^confidence (-?\d+(?:\.\d+)?)$/;

/** Parse a route summary; undefined when the text is not one. */
export function parseSummary(text: string | undefined | null): Route | undefined {
  const m = text ? SUMMARY.exec(text.trim()) : null;
  if (!m || !text) {
    return undefined;
  }
  const route: Route = { route: m[1] as RouteName, reasons: [], summary: text.trim() };
  for (const part of m[2].split(", ").filter((p) => p !== "")) {
    const c = CONFIDENCE.exec(part);
    if (c) {
      route.confidence = Number(c[1]);
    } else {
      route.reasons.push(part);
    }
  }
  return route;
}

const ICONS: Record<RouteName, string> = {
  local: "$(device-desktop)",
  remote: "$(cloud-upload)",
  none: "$(circle-slash)",
};

/** Status bar text: the route and confidence of the last completion, and local-only. */
export function statusText(route: Route | undefined, localOnly: boolean): string {
  const lock = localOnly ? "$(lock) " : "";
  if (route === undefined) {
    return `${lock}$(sparkle) SynConfRoute`;
  }
  const conf = route.confidence === undefined ? "" : ` ${route.confidence.toFixed(2)}`;
  return `${lock}${ICONS[route.route]} ${route.route}${conf}`;
}

/** Status bar tooltip: the last route in words, then how to see more. */
export function statusTooltip(route: Route | undefined, localOnly: boolean): string {
  const lines = [
    route === undefined
      ? "SynConfRoute: no completion yet"
      : `${route.summary}${route.reasons.includes("cache-hit") ? " (from the cache)" : ""}`,
    localOnly
      ? "Local-only is ON: no code leaves this machine."
      : "Local-only is off: unsure or invalid local completions go to the remote model.",
    "Click for the server's status; hover a completed line for its route card.",
  ];
  return lines.join("\n");
}

/** Several lines describing the server's status (output channel). */
export function statusReport(st: ServerStatus): string {
  const r = st.routes;
  return [
    `local tier: ${st.local}`,
    `remote tier: ${st.remote}`,
    `local-only: ${st.local_only ? "on (nothing leaves this machine)" : "off"}`,
    `policy: ${st.policy}, threshold ${st.threshold}`,
    `completions: ${st.completions} (${r.local} local, ${r.remote} remote, ${r.none} none), ` +
      `${st.accepted} accepted`,
    `last: ${st.last ?? "-"}`,
  ].join("\n");
}
