#!/usr/bin/env bash
# Layering check: clap and the `cli` module are named only in src/cli/, src/main.rs and the
# command layer (src/commands/), and the top-level modules of src/ import each other without a
# cycle (an edge A -> B is any `crate::B` or `super::` path from a file of A to B, test modules
# left out). `--files` also reports cycles between the files inside one module.
set -euo pipefail
cd "$(dirname "$0")/.."
level=top
[[ "${1:-}" == "--files" ]] && level="file"

status=0
# forbid WHAT PATTERN ALLOWED OK: PATTERN (grep -E) may match only in files whose path matches
# ALLOWED; comment lines are left out. Prints OK when it holds, the matches when not.
forbid() {
  local hits
  if hits=$(grep -rnE "$2" src --include='*.rs' | grep -vE "$3" | grep -vE '^[^:]+:[0-9]+:\s*//'); then
    echo "check-layers: $1:" >&2
    echo "$hits" >&2
    status=1
  else
    echo "check-layers: $4"
  fi
}

forbid "clap or cli:: outside src/cli/, src/main.rs and src/commands/" '\bclap\b|\bcli::' \
  '^src/(cli/|main\.rs|commands/)' "clap and cli:: only in src/cli/, src/main.rs, src/commands/"
# Every Kubernetes call is made in src/cluster/ (one module, one error type): no API handle,
# raw request or watch is built anywhere else.
forbid "a Kubernetes call outside src/cluster/" '\bApi::|\bApi<|request_text|request_stream|await_condition' \
  '^src/cluster/' "every Kubernetes call is made in src/cluster/"

if python3 - "$level" <<'PY'
import re,os,sys,collections
root="."; level=sys.argv[1]
files=[]
for d,_,fs in os.walk(os.path.join(root,'src')):
    for f in fs:
        if f.endswith('.rs'): files.append(os.path.relpath(os.path.join(d,f),root))
def modpath(f):
    p=f[4:-3].split('/')
    if p[-1]=='mod': p=p[:-1]
    if p==['main']: return []
    return p
mods={tuple(modpath(f)):f for f in files}
def unit(mp):
    if level=='top': return tuple(mp[:1]) or ('main',)
    # file level: longest prefix that is a file
    for k in range(len(mp),-1,-1):
        if tuple(mp[:k]) in mods: return tuple(mp[:k]) or ('main',)
    return ('main',)
g=collections.defaultdict(set)
for f in files:
    me=tuple(modpath(f)); src=text=open(os.path.join(root,f)).read()
    # drop test modules
    text=re.split(r'#\[cfg\(test\)\]\s*mod tests',text)[0]
    text=re.sub(r'//.*','',text)
    refs=[]
    for m in re.finditer(r'\bcrate::((?:[a-z_][a-z0-9_]*::)*[a-z_][a-z0-9_]*)',text):
        refs.append(m.group(1).split('::'))
    for m in re.finditer(r'\bcrate::\{([^}]*)\}',text):
        for part in m.group(1).split(','):
            part=part.strip().split('::')
            if part[0]: refs.append(part)
    base=list(me) if (f.endswith('mod.rs')) else list(me[:-1])
    for m in re.finditer(r'\b((?:super::)+)((?:[a-z_][a-z0-9_]*::)*[a-z_][a-z0-9_]*)',text):
        n=m.group(1).count('super::')
        b=base[:len(base)-n+1] if False else (list(me)[:len(me)-n])
        refs.append(b+m.group(2).split('::'))
    for m in re.finditer(r'\bself::((?:[a-z_][a-z0-9_]*::)*[a-z_][a-z0-9_]*)',text):
        refs.append(list(me)+m.group(1).split('::'))
    a=unit(list(me))
    for r in refs:
        b=unit(r)
        if b!=a and b!=('main',): g[a].add(b)
# tarjan
idx={};low={};st=[];on=set();out=[];c=[0]
sys.setrecursionlimit(10000)
def sc(v):
    idx[v]=low[v]=c[0];c[0]+=1;st.append(v);on.add(v)
    for w in g.get(v,()):
        if w not in idx: sc(w);low[v]=min(low[v],low[w])
        elif w in on: low[v]=min(low[v],idx[w])
    if low[v]==idx[v]:
        comp=[]
        while True:
            w=st.pop();on.discard(w);comp.append(w)
            if w==v:break
        if len(comp)>1: out.append(comp)
for v in list(g): 
    if v not in idx: sc(v)
for comp in out:
    print('cycle:', ' '.join(sorted('::'.join(x) for x in comp)))
    for a in sorted(comp):
        print('   ','::'.join(a),'->',', '.join(sorted('::'.join(b) for b in g[a] if b in comp)))

if not out:
    print(f"check-layers: no import cycle among src/ modules ({level} level)")
sys.exit(1 if out else 0)
PY
then :; else
  echo "check-layers: import cycle (above)" >&2
  status=1
fi
exit "$status"
