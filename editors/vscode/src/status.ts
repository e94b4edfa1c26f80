// The route of the last completion, for the status bar. No `vscode` import: unit-tested
// under plain node.

export type RouteName = "local" | "remote" | "none";

export interface Route {
  route: RouteName;
  reasons: string[];
  confidence?: number;
  cacheHit: boolean;
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
  /** The embedded model's worker process; null for other local tiers. */
  local_worker?: LocalWorker | null;
}

/** The part of `local_worker` the report shows (prompt tokens reused from the KV cache). */
export interface LocalWorker {
  prompt_tokens: number;
  cached_tokens: number;
  prefills: number;
}

/** The method of the server's notification that carries each completion's route. */
export const ROUTE_NOTIFICATION = "synconfroute/route";

const ROUTES: readonly string[] = ["local", "remote", "none"];

/** The route of a `synconfroute/route` notification; undefined when `params` is not one. */
export function routeFromNotification(params: unknown): Route | undefined {
  if (typeof params !== "object" || params === null) {
    return undefined;
  }
  const p = params as Record<string, unknown>;
  if (typeof p.route !== "string" || !ROUTES.includes(p.route) || typeof p.summary !== "string") {
    return undefined;
  }
  const reasons = Array.isArray(p.reasons)
    ? p.reasons.filter((r): r is string => typeof r === "string")
    : [];
  const route: Route = {
    route: p.route as RouteName,
    reasons,
    cacheHit: p.cacheHit === true,
    summary: p.summary,
  };
  if (typeof p.confidence === "number" && Number.isFinite(p.confidence)) {
    route.confidence = p.confidence;
  }
  return route;
}

const ICONS: Record<RouteName, string> = {
  local: "$(device-desktop)",
  remote: "$(cloud-upload)",
  none: "$(circle-slash)",
};

/** Whether the language server is up: "starting" until it answered `initialize`. */
export type ServerState = "starting" | "running" | "stopped";

/** Status bar text: the route and confidence of the last completion, and local-only. */
export function statusText(
  route: Route | undefined,
  localOnly: boolean,
  state: ServerState = "running",
): string {
  const lock = localOnly ? "$(lock) " : "";
  if (state === "starting") {
    return `${lock}$(loading~spin) SynConfRoute`;
  }
  if (state === "stopped") {
    return `${lock}$(error) SynConfRoute`;
  }
  if (route === undefined) {
    return `${lock}$(sparkle) SynConfRoute`;
  }
  const conf = route.confidence === undefined ? "" : ` ${route.confidence.toFixed(2)}`;
  return `${lock}${ICONS[route.route]} ${route.route}${conf}`;
}

/** Status bar tooltip: the last route in words, then how to see more. */
export function statusTooltip(
  route: Route | undefined,
  localOnly: boolean,
  state: ServerState = "running",
): string {
  const first =
    state === "starting"
      ? "SynConfRoute: starting the server"
      : state === "stopped"
        ? "SynConfRoute: the server is not running (see Output › SynConfRoute)"
        : route === undefined
          ? "SynConfRoute: no completion yet"
          : `${route.summary}${route.cacheHit ? " (from the cache)" : ""}`;
  const lines = [
    first,
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
    ...workerReport(st.local_worker),
  ].join("\n");
}

function workerReport(w: LocalWorker | null | undefined): string[] {
  if (w === null || w === undefined || typeof w.prompt_tokens !== "number") {
    return [];
  }
  return [
    `local worker: ${w.prompt_tokens} prompt tokens, ${w.cached_tokens} of them from the ` +
      `cache; ${w.prefills} prefills`,
  ];
}
