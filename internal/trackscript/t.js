// PartnerStream's tracking script (docs/integrations.md). It reads a partner's code from the
// page's query, registers the click with the program's publishable key, keeps the click id in
// a first-party cookie for the program's attribution window, and puts it in
// window.partnerstream.clickId and in every form field named partnerstream_click_id. It uses
// no library and no third-party cookie, and it never throws on the page: every failure leaves
// clickId as it was.
(function (cfg) {
  "use strict";
  var ps = (window.partnerstream = window.partnerstream || {});
  var CLICK = "ps_click_id", VISITOR = "ps_vid", FIELD = "partnerstream_click_id";
  var script = document.currentScript;
  ps.clickId = null;
  function read(name) {
    try {
      var m = document.cookie.match(new RegExp("(?:^|; )" + name + "=([^;]*)"));
      return m ? decodeURIComponent(m[1]) : null;
    } catch (e) {
      return null;
    }
  }
  function write(name, value, days) {
    try {
      document.cookie = name + "=" + encodeURIComponent(value) + "; max-age=" + Math.round(days * 86400) +
        "; path=/; SameSite=Lax" + (location.protocol === "https:" ? "; Secure" : "");
    } catch (e) {}
  }
  function fill() {
    try {
      if (!ps.clickId) return;
      var inputs = document.querySelectorAll('input[name="' + FIELD + '"]');
      for (var i = 0; i < inputs.length; i++) inputs[i].value = ps.clickId;
    } catch (e) {}
  }
  function ready(f) {
    if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", f);
    else f();
  }
  ps.fill = fill;
  try {
    ps.ready = Promise.resolve(null);
    if (!cfg) return;
    ps.clickId = read(CLICK);
    ready(fill);
    // A form added after the page loaded gets the id when it is submitted.
    document.addEventListener("submit", fill, true);
    var query = new URLSearchParams(location.search), code = null;
    for (var i = 0; i < cfg.params.length && !code; i++) code = query.get(cfg.params[i]);
    if (!code || (cfg.model === "first_click" && ps.clickId)) {
      ps.ready = Promise.resolve(ps.clickId);
      return;
    }
    var subs = [];
    for (var n = 1; n <= 5; n++) subs.push(query.get("sub" + n) || "");
    // text/plain keeps the request simple: no preflight, one round trip.
    ps.ready = fetch(new URL("/api/script/clicks", script.src).href, {
      method: "POST", mode: "cors", credentials: "omit", keepalive: true,
      headers: {"Content-Type": "text/plain"},
      body: JSON.stringify({key: cfg.key, code: code, url: location.href, referrer: document.referrer,
        visitor_id: read(VISITOR) || "", subs: subs}),
    })
      // A refusal (429 past the key's or the address's budget included) keeps clickId and is
      // not retried: the next page that carries a code asks again.
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (b) {
        if (b && b.click_id) {
          ps.clickId = b.click_id;
          write(CLICK, b.click_id, cfg.days);
          if (b.visitor_id) write(VISITOR, b.visitor_id, 365);
          ready(fill);
        }
        return ps.clickId;
      })
      ["catch"](function () { return ps.clickId; });
  } catch (e) {}
})
