// demo.js: the checkout's demo shortcuts, for trying the shop in front of a room. Nothing here
// is part of how a checkout avoids charging twice (that is checkout.js); a real shop has none
// of it. Without JavaScript the shortcuts stay hidden and the form works as it is.
//
// - "Use" beside each test card types that card into the card field.
// - "Fill demo customer" types a made-up customer into the contact and address fields.
// - "Slow motion" is remembered in this browser; checkout.js reads the checkbox when it retries.
(function () {
  "use strict";

  var form = document.getElementById("checkout-form");
  if (!form) return;

  // fill sets a field as if typed, and tells listeners (checkout.js's shipping totals) so.
  function fill(name, value) {
    var field = form.elements[name];
    if (!field) return;
    field.value = value;
    field.dispatchEvent(new Event("input", { bubbles: true }));
    field.dispatchEvent(new Event("change", { bubbles: true }));
  }

  var tools = form.querySelector('[data-testid="demo-tools"]');
  if (tools) tools.hidden = false;

  form.querySelectorAll(".test-card-use").forEach(function (button) {
    button.hidden = false;
    button.addEventListener("click", function () {
      fill("card_number", button.dataset.card);
      form.elements.card_number.focus();
    });
  });

  var customer = form.querySelector('[data-testid="fill-demo-customer"]');
  if (customer) {
    customer.addEventListener("click", function () {
      var values = JSON.parse(customer.dataset.customer);
      Object.keys(values).forEach(function (name) { fill(name, values[name]); });
    });
  }

  var slow = document.getElementById("slow-motion");
  if (slow) {
    try {
      slow.checked = localStorage.getItem("checkoutlab.slowmotion") === "1";
      slow.addEventListener("change", function () {
        if (slow.checked) localStorage.setItem("checkoutlab.slowmotion", "1");
        else localStorage.removeItem("checkoutlab.slowmotion");
      });
    } catch (e) { /* no storage: the box works for this page only */ }
  }
})();
