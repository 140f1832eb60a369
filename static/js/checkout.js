// checkout.js: the script of the checkout form and of the order page's "pay with another card"
// form. It is teaching material: how a browser places an order so that a lost response, a
// retry, a second click, a reload or a second tab never charges the customer twice.
//
// The forms work without it: they are real <form method="post"> with a hidden idempotency_key
// that the server made when it rendered the form. This script adds:
//
// 1. An idempotency key made in the page, BEFORE the first attempt, for this cart (or this
//    order) and these details, kept in localStorage: a reload or a second tab with the same
//    cart and details finds the same key. A changed cart is a new operation and gets a new key.
//    A final answer (paid or declined) forgets the key, so buying the same items again later
//    is a new order.
// 2. Submission with fetch and the Idempotency-Key header, a client timeout, and automatic
//    retries with exponential backoff and jitter on network errors, timeouts, 5xx and
//    409 "request in progress" — ALWAYS with the same key. The server answers a retry with
//    the stored answer of the first attempt, or resumes it: it never charges twice. Each
//    attempt says "Prefer: wait=2": if the first attempt is still running, the server holds
//    this one up to 2 s for its answer instead of answering 409 at once.
// 3. Honest states in the status line and on the button (a spinner, what is happening), the
//    fields locked, and no second "Pay" button while the outcome is unknown.
// 4. A naive-client switch for the failure lab (?naive=1): a new key on every retry — the bug.
// 5. Slow motion for a demo (a checkbox that demo.js shows): each retry waits a few seconds, so
//    a room can watch the "still confirming" state that normally lasts a fraction of a second.
(function () {
  "use strict";

  var form = document.getElementById("checkout-form") || document.querySelector('[data-testid="pay-form"]');
  if (!form || !window.fetch) return; // no fetch: the plain form post still works

  var button = form.querySelector('[data-testid="place-order"]');
  var status = form.querySelector('[data-testid="checkout-status"]');
  var isCheckout = form.id === "checkout-form";

  // ---- Tuning --------------------------------------------------------------------------------
  var CLIENT_TIMEOUT_MS = 15000; // give up on one attempt (the server's own gateway timeout is shorter)
  var FIRST_BACKOFF_MS = 400; // wait before the first retry; doubles each time…
  var MAX_BACKOFF_MS = 5000; // …up to this
  var MAX_ATTEMPTS = 8; // then hand over to a page that keeps checking (we still never pay again)
  var SLOW_AFTER_MS = 3000; // when to switch from "Placing…" to "Still confirming…"
  var PREFER_WAIT_S = 2; // how long the server may hold a retry for the first attempt's answer

  var PLACING = isCheckout ? "Placing your order…" : "Sending your payment…";
  var STILL_CONFIRMING = "Still confirming with the payment provider — please keep this page open; you will not be charged twice.";
  var BUTTON_PLACING = isCheckout ? "Placing your order…" : "Sending your payment…";
  var BUTTON_CONFIRMING = "Confirming with the provider…";
  var NAIVE_BANNER = "Naive client: a new idempotency key on every retry (lab mode)";

  // ---- The key -------------------------------------------------------------------------------

  // newKey makes a random UUID. crypto.randomUUID exists only in secure contexts (https or
  // localhost); elsewhere build one from crypto.getRandomValues, which exists everywhere.
  function newKey() {
    if (window.crypto && typeof crypto.randomUUID === "function") return crypto.randomUUID();
    var b = new Uint8Array(16);
    crypto.getRandomValues(b);
    b[6] = (b[6] & 0x0f) | 0x40; // version 4
    b[8] = (b[8] & 0x3f) | 0x80; // variant 10
    var hex = Array.prototype.map.call(b, function (x) { return (x + 0x100).toString(16).slice(1); }).join("");
    return hex.slice(0, 8) + "-" + hex.slice(8, 12) + "-" + hex.slice(12, 16) + "-" + hex.slice(16, 20) + "-" + hex.slice(20);
  }

  // hash is FNV-1a (32 bits): enough to tell "the same cart and details" from "changed".
  // Only this number is stored, never the details themselves.
  function hash(text) {
    var h = 0x811c9dc5;
    for (var i = 0; i < text.length; i++) {
      h ^= text.charCodeAt(i);
      h = Math.imul(h, 0x01000193) >>> 0;
    }
    return h.toString(16);
  }

  // The operation this form is: the cart (checkout) or the order (pay again). Its storage
  // entry holds the key and the hash of what was submitted under it.
  var scope = isCheckout ? "cart:" + form.elements.cart_id.value : "order:" + form.dataset.orderId;
  var storageName = "checkoutlab.idempotency." + scope;

  // fingerprint: the cart's contents (rendered by the server into data-cart) and every field
  // of the form except the hidden ones that change per view.
  function fingerprint() {
    var parts = [form.dataset.cart || ""];
    new FormData(form).forEach(function (value, name) {
      if (name !== "_csrf" && name !== "idempotency_key") parts.push(name + "=" + value);
    });
    return hash(parts.join("\n"));
  }

  // localStorage can be missing or full (private windows): then the key lives in memory only,
  // which still covers retries and double clicks, just not a reload.
  var memory = {};
  function load() {
    try { return JSON.parse(localStorage.getItem(storageName)); } catch (e) { return memory[storageName] || null; }
  }
  function save(entry) {
    memory[storageName] = entry;
    try { localStorage.setItem(storageName, JSON.stringify(entry)); } catch (e) { /* memory only */ }
  }
  function forget() {
    delete memory[storageName];
    try { localStorage.removeItem(storageName); } catch (e) { /* nothing stored */ }
  }

  // keyForThisSubmit returns the stored key if the cart and details are the ones it was made
  // for, else a new one (stored before the first attempt is sent).
  function keyForThisSubmit() {
    var fp = fingerprint();
    var saved = load();
    if (saved && saved.fingerprint === fp) return saved.key;
    var entry = { key: newKey(), fingerprint: fp, created: new Date().toISOString() };
    save(entry);
    return entry.key;
  }

  // ---- The naive switch (failure lab) ----------------------------------------------------------
  // ?naive=1 turns it on for this browser, ?naive=0 turns it off. Off by default.
  var naive = (function () {
    var q = new URLSearchParams(location.search).get("naive");
    try {
      if (q === "1") localStorage.setItem("checkoutlab.naive", "1");
      if (q === "0") localStorage.removeItem("checkoutlab.naive");
      return localStorage.getItem("checkoutlab.naive") === "1";
    } catch (e) { return q === "1"; }
  })();
  if (naive) {
    var banner = document.createElement("p");
    banner.className = "naive-banner";
    banner.setAttribute("data-testid", "naive-banner");
    banner.setAttribute("role", "note");
    banner.textContent = NAIVE_BANNER;
    form.insertBefore(banner, form.firstChild);
  }

  // ---- Slow motion (demos) ----------------------------------------------------------------------
  // The checkbox carries its wait in data-wait-ms. It only makes this browser wait longer
  // before retrying: the shop and the gateway behave exactly as without it.
  var slowMotion = document.getElementById("slow-motion");
  function slowMotionWait() {
    return slowMotion && slowMotion.checked ? Number(slowMotion.dataset.waitMs) || 0 : 0;
  }

  // ---- One attempt -------------------------------------------------------------------------------

  // attempt POSTs the form's fields (taken once, when the customer clicked) under key and
  // resolves to {status, body, retryAfter} — or to {error} when no answer came (network error,
  // or our own timeout). It never rejects.
  function attempt(fields, key) {
    var abort = new AbortController();
    var timer = setTimeout(function () { abort.abort(); }, CLIENT_TIMEOUT_MS);
    fields.set("idempotency_key", key); // the same key in the body, for readers of logs
    return fetch(form.action, {
      method: "POST",
      body: new URLSearchParams(fields),
      headers: {
        "Idempotency-Key": key,
        // RFC 7240: "if my key is still in progress, hold me for its answer". Without it the
        // shop answers 409 at once with Retry-After, and we would have to come back.
        "Prefer": "wait=" + PREFER_WAIT_S,
        "Accept": "application/json",
        "X-CSRF-Token": form.elements._csrf.value,
      },
      credentials: "same-origin",
      signal: abort.signal,
    }).then(function (res) {
      if (res.redirected) return { redirect: res.url }; // e.g. an empty cart: the server knows best
      var isJSON = (res.headers.get("Content-Type") || "").indexOf("application/json") === 0;
      return (isJSON ? res.json() : Promise.resolve(null)).then(function (body) {
        return { status: res.status, body: body || {}, retryAfter: Number(res.headers.get("Retry-After")) || 0 };
      });
    }).catch(function (err) {
      return { error: err.name === "AbortError" ? "timeout" : "network" };
    }).finally(function () { clearTimeout(timer); });
  }

  // retryable: no answer, a server or gateway failure, or "the first attempt is still running".
  // For all of these the outcome is unknown, and the same key is the safe way to find it out.
  function retryable(a) {
    if (a.error) return true;
    if (a.status >= 500) return true;
    return a.status === 409 && /^idempotency_(request_in_progress|lease_lost)$/.test(a.body.error);
  }

  // backoff: exponential with "full jitter", so many browsers retrying after one outage do not
  // all come back at the same instant. Retry-After from the server is a floor.
  function backoff(n, retryAfterSeconds) {
    var ceiling = Math.min(MAX_BACKOFF_MS, FIRST_BACKOFF_MS * Math.pow(2, n - 1));
    var wait = ceiling / 2 + Math.random() * (ceiling / 2);
    return Math.max(wait, retryAfterSeconds * 1000, slowMotionWait());
  }
  function sleep(ms) { return new Promise(function (resolve) { setTimeout(resolve, ms); }); }

  // ---- The submission ------------------------------------------------------------------------------

  var busy = false;
  var buttonLabel = ""; // "Place order · $24.00" as it was when clicked, put back by unlock

  function say(text) { status.textContent = text; }

  // sayOnButton shows a spinner and what is happening on the (disabled) button.
  function sayOnButton(text) {
    var spinner = document.createElement("span");
    spinner.className = "spinner";
    spinner.setAttribute("aria-hidden", "true");
    button.replaceChildren(spinner, document.createTextNode(text));
  }

  // The customer's fields are locked while the outcome is unknown: what is being paid for
  // must not change under the key. (Disabled fields are left out of FormData, which is why
  // place() takes the fields before it locks them.)
  function setFieldsDisabled(disabled) {
    Array.prototype.forEach.call(form.elements, function (el) {
      if (el !== button && el.type !== "hidden") el.disabled = disabled;
    });
  }
  function lock() {
    busy = true;
    button.disabled = true;
    button.setAttribute("aria-busy", "true");
    buttonLabel = button.innerHTML;
    sayOnButton(BUTTON_PLACING);
    setFieldsDisabled(true);
  }
  function unlock() {
    busy = false;
    button.disabled = false;
    button.removeAttribute("aria-busy");
    if (buttonLabel) button.innerHTML = buttonLabel;
    setFieldsDisabled(false);
  }
  function orderPage(id) { location.assign("/orders/" + encodeURIComponent(id)); }

  // plainSubmit hands the form to the browser as if there were no script, under the same key:
  // the server then renders what it has to say (field errors, out of stock, an order already
  // placed from this cart in another tab) as a page.
  function plainSubmit(key) {
    form.elements.idempotency_key.value = key;
    setFieldsDisabled(false); // a disabled field would not be sent
    HTMLFormElement.prototype.submit.call(form);
  }

  function stillConfirming() {
    say(STILL_CONFIRMING);
    sayOnButton(BUTTON_CONFIRMING);
  }

  function place() {
    var key = naive ? newKey() : keyForThisSubmit();
    var fields = new FormData(form); // what the customer clicked on; every retry sends the same
    lock();
    say(PLACING);
    form.dataset.idempotencyKey = key; // visible to tests and to curious readers in DevTools
    var slow = setTimeout(stillConfirming, SLOW_AFTER_MS);

    function loop(n) {
      return attempt(fields, key).then(function (a) {
        if (a.redirect) { location.assign(a.redirect); return; }
        if (retryable(a)) {
          stillConfirming(); // the outcome is unknown: say so, and never offer to pay again
          if (n >= MAX_ATTEMPTS) {
            // Keep waiting on a page that checks by itself; the key stays stored for a reload.
            location.assign(isCheckout ? form.action + "/pending?key=" + encodeURIComponent(key) : location.pathname);
            return;
          }
          if (naive) { key = newKey(); form.dataset.idempotencyKey = key; } // THE BUG the lab shows
          return sleep(backoff(n, a.retryAfter)).then(function () { return loop(n + 1); });
        }
        clearTimeout(slow);
        var body = a.body;
        if (a.status === 201 || a.status === 402) {
          // Final: paid (201) or declined (402). The order page shows which, and after a decline
          // offers another card — a new operation with a new key.
          forget();
          say(a.status === 201 ? "Order placed — opening your confirmation…" : "Your card was declined — opening your order…");
          orderPage(body.order ? body.order.id : body.order_id);
          return;
        }
        if (a.status === 422 && body.error === "idempotency_key_reuse") {
          // The key was used for a different cart or different details: this is a new
          // operation, so it needs a new key. Let the customer check and click again.
          forget();
          say("Your cart or your details changed since your order was first sent. Please check them and place the order again.");
          unlock();
          return;
        }
        // Anything else is a final answer the server explains best as a page.
        say("Checking your details…");
        plainSubmit(key);
      });
    }
    return loop(1);
  }

  form.addEventListener("submit", function (event) {
    event.preventDefault();
    if (busy) return; // a second click while an attempt runs changes nothing…
    place(); // …and a click after a reload finds the same key in localStorage
  });

  // Shipping totals beside the form follow the chosen method.
  form.addEventListener("change", function (event) {
    var radio = event.target;
    if (radio.name !== "shipping_method") return;
    [["summary-shipping", radio.dataset.price], ["summary-total", radio.dataset.total], ["place-order-total", radio.dataset.total]]
      .forEach(function (p) {
        var el = document.getElementById(p[0]);
        if (el && p[1]) el.textContent = p[1];
      });
  });

  // Back/forward can restore this page from the cache as it was left: if nothing is running,
  // make the button usable again.
  window.addEventListener("pageshow", function (event) {
    if (event.persisted && !busy) { unlock(); say(""); }
  });

  // After a submit the server refused (a field to correct), the page comes back with an error
  // summary at the top: move the focus there, so it is read first and Tab continues from it.
  var summary = document.getElementById("checkout-error");
  if (summary) summary.focus();
})();
