// the time left of each card, once a second; every <time> in the reader's own time zone; the
// cards fetched again every data-refresh seconds (and by Refresh) without reloading the page,
// keeping any card whose reason is being typed
const p=n=>String(n).padStart(2,"0");
function span(s){if(s<=0)return"expired";const d=Math.floor(s/86400),h=Math.floor(s%86400/3600),
m=Math.floor(s%3600/60),x=s%60;
return d?d+"d "+p(h)+"h":h?h+"h "+p(m)+"m":m?m+"m "+p(x)+"s":x+"s"}
function tick(){for(const el of document.querySelectorAll("[data-expires]")){
el.textContent=span(Math.floor((Date.parse(el.dataset.expires)-Date.now())/1000))}}
function local(){for(const el of document.querySelectorAll("time[datetime]")){
const d=new Date(el.getAttribute("datetime"));if(isNaN(d))continue;
const z=new Intl.DateTimeFormat(undefined,{timeZoneName:"short"}).formatToParts(d)
.find(x=>x.type==="timeZoneName");
el.textContent=d.getFullYear()+"-"+p(d.getMonth()+1)+"-"+p(d.getDate())+" "+p(d.getHours())+":"
+p(d.getMinutes())+":"+p(d.getSeconds())+(z?" "+z.value:"")}}
function typed(c){const r=c.querySelector("input[name=reason]");return !!(r&&r.value)}
async function refresh(){
const cards=document.getElementById("cards"),said=document.getElementById("refresh-problem");
if(!cards)return;let r;
try{r=await fetch("/"+location.search,{credentials:"same-origin",cache:"no-store"})}
catch(e){said.textContent="refresh failed: "+e.message;return}
if(r.status!==200){said.textContent="refresh failed (HTTP "+r.status+"): reload the page";return}
said.textContent="";const doc=new DOMParser().parseFromString(await r.text(),"text/html");
for(const id of["summary","notes","answered","pages"]){const a=document.getElementById(id),
b=doc.getElementById(id);if(a&&b)a.replaceWith(document.importNode(b,true))}
const kept=new Map();for(const c of cards.querySelectorAll("section.card"))
if(typed(c))kept.set(c.dataset.digest,c);
const items=[];for(const c of doc.querySelectorAll("#cards > *")){
const k=c.dataset?kept.get(c.dataset.digest):undefined;
if(k){kept.delete(c.dataset.digest);items.push(k)}else items.push(document.importNode(c,true))}
for(const k of kept.values()){if(!k.classList.contains("gone")){k.classList.add("gone");
const n=document.createElement("p");n.className="note";n.textContent="No longer listed "+
"(answered, expired or changed): an answer will say which.";k.prepend(n)}items.push(k)}
cards.replaceChildren(...items);local();tick()}
const form=document.getElementById("refresh-form");
if(form)form.addEventListener("submit",e=>{e.preventDefault();refresh()});
const every=Number(document.body.dataset.refresh||0);
if(every>0)setInterval(()=>{const a=document.activeElement;
if(!(a&&a.name==="reason"))refresh()},every*1000);
local();setInterval(tick,1000);
