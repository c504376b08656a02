// trainplan ui: the page's only script of its own. An uploaded config.json is read into the
// textarea named by data-fills and a change is sent, so the estimate follows (htmx does the rest).
document.addEventListener("change", function (ev) {
  var input = ev.target;
  if (!input.dataset || !input.dataset.fills || !input.files || !input.files.length) return;
  ev.stopPropagation();
  input.files[0].text().then(function (text) {
    var area = document.getElementById(input.dataset.fills);
    area.value = text;
    area.dispatchEvent(new Event("change", { bubbles: true }));
  });
}, true);
