const D=require('better-sqlite3'); const db=new D(process.argv[3],{readonly:true});
const N=Number(process.argv[2]||250);
const cols='id, name, user_id, status, total, created_by, created_at, updated_at, version';
const ocols='o.id, o.name, o.user_id, o.status, o.total, o.created_by, o.created_at, o.updated_at, o.version';
const qo=db.prepare(`select ${cols} from orders where id > ? order by id limit ${N+1}`);
const inList=Array.from({length:N},()=>'?').join(',');
const lc='select order_id, item_id, position, quantity, unit_price from order_lines';
const ql=db.prepare(`${lc} where order_id in (${inList}) order by order_id, position`);
const ql4=db.prepare(`select order_id, item_id, quantity, unit_price from order_lines where order_id in (${inList}) order by order_id, position`);
const qlRange=db.prepare(`select order_id, item_id, quantity, unit_price from order_lines where order_id between ? and ? order by order_id, position`);
const qg=db.prepare(`select ${ocols}, (select group_concat(item_id || ' ' || quantity || ' ' || unit_price, ' ') from (select item_id, quantity, unit_price from order_lines l where l.order_id = o.id order by position)) as lines from orders o where o.id > ? order by o.id limit ${N+1}`);
const qjg=db.prepare(`select ${ocols}, (select json_group_array(json_array(item_id, quantity, unit_price)) from (select item_id, quantity, unit_price from order_lines l where l.order_id = o.id order by position)) as lines from orders o where o.id > ? order by o.id limit ${N+1}`);
const cpu=()=>{const u=process.cpuUsage(); return (u.user+u.system)/1000;};
const res={};
function t(name, f){ const s=cpu(); let n=0; let after=0; for(;;){ const r=f(after); if(!r) break; n+=r.n; after=r.last; } const ms=cpu()-s; (res[name]??=[]).push(Math.round(n/ms*1000)); }
const ids=(o,get)=>{const a=o.slice(0,N).map(get); while(a.length<N) a.push(-1); return a;};
const group=(o,l)=>{const m=new Map(); for(const x of l){const g=m.get(x.order_id); if(g) g.push(x); else m.set(x.order_id,[x]);} return m;};
const V={
 'A objects in order': (after)=>{ const o=qo.all(after); if(!o.length) return; group(o, ql.all(...ids(o,r=>r.id))); return {n:Math.min(o.length,N), last:o[Math.min(o.length,N)-1].id}; },
 'A4 4 cols': (after)=>{ const o=qo.all(after); if(!o.length) return; group(o, ql4.all(...ids(o,r=>r.id))); return {n:Math.min(o.length,N), last:o[Math.min(o.length,N)-1].id}; },
 'R range 4 cols': (after)=>{ const o=qo.all(after); if(!o.length) return; const k=Math.min(o.length,N); group(o, qlRange.all(o[0].id, o[k-1].id)); return {n:k, last:o[k-1].id}; },
 'G group_concat': (after)=>{ const o=qg.all(after); if(!o.length) return; for (const r of o) { const p=r.lines?r.lines.split(' '):[]; } return {n:Math.min(o.length,N), last:o[Math.min(o.length,N)-1].id}; },
 'J json_group_array': (after)=>{ const o=qjg.all(after); if(!o.length) return; for (const r of o) JSON.parse(r.lines); return {n:Math.min(o.length,N), last:o[Math.min(o.length,N)-1].id}; },
};
for (let i=0;i<3;i++) for (const [k,f] of Object.entries(V)) t(k,f);
for (const [k,v] of Object.entries(res)) console.log(k.padEnd(22), v.join(' '), 'orders per cpu-s');
