// Live updates: the server announces a new version of what #live shows (server-sent
// events); the page then fetches itself again and swaps #live in place, except its cards.
//
// A card (article.card, keyed by data-key: the call's key and digest) never changes what it
// decides: a card still served stays as it is (what was typed in it too); a card no longer
// served (its call was decided, or changed) stays where it was with its buttons off and a
// note saying so; a new card is added after the others. So a click meant for one call never
// lands on another.
const live = document.getElementById("live");

function settle(old, fresh) {
  const oldCards = old.querySelector(".cards");
  let freshCards = fresh.querySelector(".cards");
  if (!oldCards) return;
  if (!freshCards) {
    freshCards = document.createElement("div");
    freshCards.className = "cards";
    fresh.appendChild(freshCards);
  }
  const served = new Map();
  for (const card of freshCards.querySelectorAll("article.card")) served.set(card.dataset.key, card);
  const calls = new Set([...served.values()].map((c) => c.querySelector(".decision")?.dataset.call).filter(Boolean));
  // Every call still pending as it was shown: its key and digest, on a call card or a batch card.
  const pending = new Set(
    [...freshCards.querySelectorAll("[data-call][data-digest]")].map((e) => e.dataset.call + " " + e.dataset.digest),
  );
  const kept = [];
  for (const card of oldCards.querySelectorAll("article.card")) {
    if (served.has(card.dataset.key)) {
      served.delete(card.dataset.key);
    } else if (!card.classList.contains("gone")) {
      card.classList.add("gone");
      for (const control of card.querySelectorAll("button, input, textarea, select")) control.disabled = true;
      const call = card.querySelector(".decision")?.dataset.call;
      const note = document.createElement("p");
      note.className = "gone-note";
      note.setAttribute("role", "status");
      if (card.classList.contains("batch")) {
        // The rule holds per call: name each call of the card decided or changed elsewhere.
        const changed = [...card.querySelectorAll(".batch-call")].filter(
          (f) => !pending.has(f.dataset.call + " " + f.dataset.digest),
        );
        for (const f of changed) f.classList.add("changed");
        const named = changed.map((f) => `${f.dataset.text} (call ${f.dataset.call})`).join(", ");
        note.textContent = changed.length
          ? `Decided or changed elsewhere since this card was shown: ${named}. Approve all is off and nothing runs from this card; decide the rest on their new card.`
          : "The calls of this turn changed since this card was shown. Approve all is off and nothing runs from this card.";
      } else {
        note.textContent = call && calls.has(call)
          ? "This call changed since it was shown: decide it on its new card. Nothing runs from this one."
          : "This was decided, or is no longer waiting, since it was shown. Nothing runs from this card.";
      }
      card.prepend(note);
    }
    kept.push(card);
  }
  freshCards.replaceChildren(...kept, ...served.values());
}

if (live && window.EventSource) {
  new EventSource(live.dataset.stream).onmessage = async (message) => {
    if (message.data === live.dataset.version) return;
    const html = await (await fetch(location.href, { headers: { Accept: "text/html" } })).text();
    const fresh = new DOMParser().parseFromString(html, "text/html").getElementById("live");
    if (!fresh) return;
    settle(live, fresh);
    live.replaceChildren(...fresh.childNodes);
    live.dataset.version = fresh.dataset.version;
  };
}
