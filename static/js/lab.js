// The failure lab's pages: a run page that refreshes itself while its run is going, run
// buttons that are all disabled from the first click (the lab runs one scenario at a time),
// copy buttons for the CLI commands, and presenter mode.
(function () {
  "use strict";

  // A run still going: look again in a second. (Without JavaScript, a meta refresh does it.)
  if (document.querySelector("[data-lab-running]")) {
    setTimeout(function () { location.reload(); }, 1000);
  }

  // One run at a time: once a run button is clicked, every run button waits.
  document.addEventListener("submit", function (e) {
    if (!e.target.matches("[data-testid=lab-run-form]")) return;
    document.querySelectorAll("[data-testid=lab-run-button]").forEach(function (b) {
      // Disabled after this tick, or the clicked button's form would not be sent.
      setTimeout(function () { b.disabled = true; }, 0);
    });
  });

  document.addEventListener("click", function (e) {
    var b = e.target.closest("[data-copy]");
    if (!b || !navigator.clipboard) return;
    navigator.clipboard.writeText(b.dataset.copy).then(function () { b.textContent = "Copied"; });
  });

  // Presenter mode: the events are revealed one at a time. → or space shows the next one; a
  // decisive event (and the first) is preceded by a question to the room, shown on its own
  // step. ← goes back a step. The verdict shows once every event is out.
  var root = document.querySelector("[data-testid=lab-present]");
  if (!root) return;
  var events = Array.prototype.slice.call(root.querySelectorAll("[data-testid=lab-event]"));
  var prompt = root.querySelector("[data-testid=lab-prompt]");
  var verdict = root.querySelector("[data-testid=lab-present-verdict]");
  var steps = []; // each step: {prompt: text} or {event: i}
  events.forEach(function (ev, i) {
    if (ev.dataset.prompt) steps.push({ prompt: ev.dataset.prompt });
    steps.push({ event: i });
  });
  var at = 0; // how many steps are done

  function show() {
    var shown = 0, asking = "";
    for (var s = 0; s < at; s++) {
      if (steps[s].prompt !== undefined) asking = steps[s].prompt;
      else { shown = steps[s].event + 1; asking = ""; }
    }
    events.forEach(function (ev, i) {
      ev.hidden = i >= shown;
      ev.classList.toggle("lab-latest", i === shown - 1);
      // A gap row shows with the event after it.
      var gap = ev.previousElementSibling;
      if (gap && gap.dataset.testid === "lab-gap") gap.hidden = i >= shown;
    });
    prompt.hidden = asking === "";
    prompt.querySelector(".lab-prompt-text").textContent = asking;
    verdict.hidden = at < steps.length;
    var latest = events[shown - 1];
    if (!prompt.hidden) prompt.scrollIntoView({ block: "nearest" });
    else if (latest) latest.scrollIntoView({ block: "nearest" });
  }

  document.addEventListener("keydown", function (e) {
    if (e.altKey || e.ctrlKey || e.metaKey) return;
    if (e.key === "ArrowRight" || e.key === " " || e.key === "PageDown") {
      if (at < steps.length) at++;
    } else if (e.key === "ArrowLeft" || e.key === "PageUp") {
      if (at > 0) at--;
    } else {
      return;
    }
    e.preventDefault();
    show();
  });
  show();
})();
