// checkout.js: the checkout page's only script. The form works without it; this adds two
// comforts and nothing the server relies on.
//
// 1. Choosing a shipping method updates the totals shown beside the form.
// 2. Submitting disables the "Place order" button and says what is happening, so an impatient
//    double click does not send the form twice. The server does not trust this: a second
//    submit of the same form (same cart) is answered with the order the first one created.
(function () {
  "use strict";
  var form = document.getElementById("checkout-form");
  if (!form) return;
  var button = form.querySelector('[data-testid="place-order"]');
  var status = form.querySelector('[data-testid="checkout-status"]');

  function setText(id, text) {
    var el = document.getElementById(id);
    if (el && text) el.textContent = text;
  }

  form.addEventListener("change", function (event) {
    var radio = event.target;
    if (radio.name !== "shipping_method") return;
    setText("summary-shipping", radio.dataset.price);
    setText("summary-total", radio.dataset.total);
    setText("place-order-total", radio.dataset.total);
  });

  form.addEventListener("submit", function () {
    // Disable after the browser has taken the form's values: a disabled button still submits
    // the form it was clicked in, but cannot be clicked again.
    window.setTimeout(function () { button.disabled = true; }, 0);
    button.setAttribute("aria-busy", "true");
    status.textContent = "Placing your order… please do not close this page.";
  });

  // Coming back with the browser's Back button can restore the page as it was left:
  // re-enable the button so the customer is not stuck.
  window.addEventListener("pageshow", function () {
    button.disabled = false;
    button.removeAttribute("aria-busy");
    status.textContent = "";
  });
})();
