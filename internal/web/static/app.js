// The inbox's one script: live countdowns, and a reload when the account's
// requests change. Every page works without it.
"use strict";

function tick() {
  const now = Date.now();
  for (const el of document.querySelectorAll("[data-expires]")) {
    const left = Math.round((Date.parse(el.dataset.expires) - now) / 1000);
    if (left <= 0) {
      el.textContent = "expired";
      el.classList.add("soon");
      continue;
    }
    const m = Math.floor(left / 60), s = left % 60, mmss = m + ":" + String(s).padStart(2, "0");
    // data-label says what expires, where a page has more than one expiry.
    el.textContent = el.dataset.label ? el.dataset.label + " " + mmss : mmss + " left";
    el.classList.toggle("soon", left < 60);
  }
}

function typing() {
  for (const t of document.querySelectorAll("textarea")) {
    if (t.value !== "") return true;
  }
  return false;
}

function live() {
  if (!document.body.dataset.live || !window.EventSource) return;
  const events = new EventSource("/approvals/events");
  events.addEventListener("changed", () => {
    // Keep what a person is typing; they reload when they are done.
    if (!typing()) location.reload();
  });
}

tick();
setInterval(tick, 1000);
live();
