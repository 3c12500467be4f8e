// Live updates: the server announces a new version of what #live shows (server-sent
// events); the page then fetches itself again and swaps #live in place.
const live = document.getElementById("live");
if (live && window.EventSource) {
  new EventSource(live.dataset.stream).onmessage = async (message) => {
    if (message.data === live.dataset.version) return;
    const html = await (await fetch(location.href, { headers: { Accept: "text/html" } })).text();
    const fresh = new DOMParser().parseFromString(html, "text/html").getElementById("live");
    if (fresh) { live.innerHTML = fresh.innerHTML; live.dataset.version = fresh.dataset.version; }
  };
}
