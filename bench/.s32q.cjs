const D=require('better-sqlite3'); const db=new D('/tmp/rowi-bench-exports-D5pXjI/rowi.db',{readonly:true});
const N=Number(process.argv[2]||250);
const cols='id, name, user_id, status, total, created_by, created_at, updated_at, version';
const qo=db.prepare(`select ${cols} from orders where id > ? order by id limit ${N+1}`);
const qoR=db.prepare(`select ${cols} from orders where id > ? order by id limit ${N+1}`).raw(true);
const inList=Array.from({length:N},()=>'?').join(',');
const lc='select order_id, item_id, position, quantity, unit_price from order_lines';
const ql=db.prepare(`${lc} where order_id in (${inList}) order by order_id, position`);
const qlR=db.prepare(`${lc} where order_id in (${inList}) order by order_id, position`).raw(true);
const qlRn=db.prepare(`${lc} where order_id in (${inList})`).raw(true);
const qlRange=db.prepare(`${lc} where order_id between ? and ?`).raw(true);
const qlRangeO=db.prepare(`${lc} where order_id between ? and ? order by order_id, position`).raw(true);
const cpu=()=>{const u=process.cpuUsage(); return (u.user+u.system)/1000;};
const res={};
function t(name, f){ const s=cpu(); let n=0; let after=0; for(;;){ const r=f(after); if(!r) break; n+=r.n; after=r.last; } const ms=cpu()-s; (res[name]??=[]).push(Math.round(n/ms*1000)); }
const ids=(o,get)=>{const a=o.slice(0,N).map(get); while(a.length<N) a.push(-1); return a;};
const V={
 'A objects in order': (after)=>{ const o=qo.all(after); if(!o.length) return; ql.all(...ids(o,r=>r.id)); return {n:Math.min(o.length,N), last:o[Math.min(o.length,N)-1].id}; },
 'B raw in order': (after)=>{ const o=qoR.all(after); if(!o.length) return; qlR.all(...ids(o,r=>r[0])); return {n:Math.min(o.length,N), last:o[Math.min(o.length,N)-1][0]}; },
 'C raw in noorder': (after)=>{ const o=qoR.all(after); if(!o.length) return; qlRn.all(...ids(o,r=>r[0])); return {n:Math.min(o.length,N), last:o[Math.min(o.length,N)-1][0]}; },
 'D raw range': (after)=>{ const o=qoR.all(after); if(!o.length) return; const k=Math.min(o.length,N); qlRange.all(o[0][0], o[k-1][0]); return {n:k, last:o[k-1][0]}; },
 'D2 raw range order': (after)=>{ const o=qoR.all(after); if(!o.length) return; const k=Math.min(o.length,N); qlRangeO.all(o[0][0], o[k-1][0]); return {n:k, last:o[k-1][0]}; },
 'E orders raw': (after)=>{ const o=qoR.all(after); if(!o.length) return; const k=Math.min(o.length,N); return {n:k, last:o[k-1][0]}; },
 'F orders obj': (after)=>{ const o=qo.all(after); if(!o.length) return; const k=Math.min(o.length,N); return {n:k, last:o[k-1].id}; },
};
for (let i=0;i<3;i++) for (const [k,f] of Object.entries(V)) t(k,f);
for (const [k,v] of Object.entries(res)) console.log(k.padEnd(22), v.join(' '), 'orders per cpu-s');
