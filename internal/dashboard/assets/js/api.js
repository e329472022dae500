// Calls to the dashboard JSON API with the session cookie, the CSRF header on requests that
// change state, and one silent refresh when the access token has expired.
import { t } from './boot.js';

export class APIError extends Error {
  constructor(status, problem) {
    super(problem.detail || problem.title || `HTTP ${status}`);
    this.status = status;
    this.problem = problem;
  }
}

function csrfToken() {
  // Read on every request: the token changes after a key rotation.
  const m = document.cookie.match(/(?:^|;\s*)ps_csrf=([^;]*)/);
  return m ? decodeURIComponent(m[1]) : '';
}

let refreshing = null;

export async function refreshSession() {
  refreshing ??= fetch('/api/auth/refresh', { method: 'POST', credentials: 'same-origin' })
    .then((r) => r.ok)
    .finally(() => { refreshing = null; });
  return refreshing;
}

// send calls the API; body is JSON-encoded, unless type names another content type (an
// upload), when it is sent as it is.
async function send(method, path, body, retried, type = 'application/json') {
  const headers = { Accept: 'application/json' };
  if (method !== 'GET') headers['X-CSRF-Token'] = csrfToken();
  if (body !== undefined) headers['Content-Type'] = type;
  if (method === 'POST') headers['Idempotency-Key'] = crypto.randomUUID();
  const payload = body === undefined || type !== 'application/json' ? body : JSON.stringify(body);
  let res;
  try {
    res = await fetch(path, { method, headers, credentials: 'same-origin', body: payload });
  } catch {
    throw new APIError(0, { code: 'network', detail: t('error.network') });
  }
  if (res.status === 204) return null;
  const data = await res.json().catch(() => ({}));
  if (res.ok) return data;
  if (res.status === 401 && !retried && data.code === 'session_expired' && (await refreshSession())) {
    return send(method, path, body, true, type);
  }
  if (res.status === 401 && !path.startsWith('/api/auth/')) {
    location.assign('/login?next=' + encodeURIComponent(location.pathname + location.search));
  }
  throw new APIError(res.status, data);
}

// withQuery appends the query's set values to path.
export function withQuery(path, query) {
  const q = query ? new URLSearchParams(Object.entries(query).filter(([, v]) => v !== '' && v != null)).toString() : '';
  return q ? `${path}?${q}` : path;
}

export const api = {
  get: (path, query) => send('GET', withQuery(path, query)),
  post: (path, body = {}) => send('POST', path, body),
  // upload posts text (a file's contents) as type, e.g. text/csv.
  upload: (path, text, type) => send('POST', path, text, false, type),
  put: (path, body = {}) => send('PUT', path, body),
  patch: (path, body) => send('PATCH', path, body),
  del: (path) => send('DELETE', path),
};
