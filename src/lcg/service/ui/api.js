/* lcg UI: calls to the HTTP API of the same origin (POST /api/<method>, GET /api/health).
 *
 * The API answers 401 without `Authorization: Bearer <token>` (unless started with
 * --http-no-token). `lcg serve --http` prints the UI's address with the token in the fragment
 * (`/#token=...`, or `/#token=...&<view>`), which the browser never sends to a server nor in a Referer: it is read here,
 * kept in sessionStorage (this tab, this origin only) and removed from the address bar and the
 * history entry at once. Without it the UI asks for the token once and retries.
 * Failures are thrown as ApiError {status, code, message, data}: the API's one error shape.
 */
(function (global) {
  'use strict';

  var TOKEN_KEY = 'lcg-api-token';

  function ApiError(status, body) {
    var err = (body && body.error) || {};
    this.name = 'ApiError';
    this.status = status;
    this.code = err.code;
    this.message = err.message || ('HTTP ' + status);
    this.data = err.data;
  }
  ApiError.prototype = Object.create(Error.prototype);

  // `#token=<token>` or `#token=<token>&<view>` (e.g. `&timeline/<uuid>`): the view stays.
  (function takeTokenFromAddress() {
    var match = /^#token=([^&]+)(?:&(.*))?$/.exec(global.location.hash);
    if (!match) return;
    global.sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(match[1]));
    var view = match[2] ? '#' + match[2] : '';
    global.history.replaceState(null, '', global.location.pathname + global.location.search + view);
  })();

  var askToken = null; // set by the app: () => Promise<string|null>
  var pendingToken = null; // one question for all the calls refused at once

  function tokenOnce() {
    if (!pendingToken) {
      pendingToken = askToken().then(function (token) {
        pendingToken = null;
        if (token) global.sessionStorage.setItem(TOKEN_KEY, token);
        return token;
      });
    }
    return pendingToken;
  }

  function headers() {
    var h = { 'Content-Type': 'application/json' };
    var token = global.sessionStorage.getItem(TOKEN_KEY);
    if (token) h.Authorization = 'Bearer ' + token;
    return h;
  }

  function send(url, init, retried) {
    return global.fetch(url, Object.assign({ headers: headers(), cache: 'no-store' }, init))
      .then(function (res) {
        return res.text().then(function (text) {
          var body = null;
          try { body = text ? JSON.parse(text) : {}; } catch (err) { body = null; }
          if (res.status === 401 && !retried && askToken) {
            return tokenOnce().then(function (token) {
              if (!token) throw new ApiError(401, body);
              return send(url, init, true);
            });
          }
          if (!res.ok) throw new ApiError(res.status, body);
          return body;
        });
      });
  }

  function call(method, params) {
    return send('/api/' + encodeURIComponent(method), {
      method: 'POST', body: JSON.stringify(params || {})
    }, false);
  }

  function health() {
    return send('/api/health', { method: 'GET' }, false);
  }

  global.LcgApi = {
    call: call,
    health: health,
    ApiError: ApiError,
    onTokenNeeded: function (fn) { askToken = fn; },
    forgetToken: function () { global.sessionStorage.removeItem(TOKEN_KEY); }
  };
})(window);
