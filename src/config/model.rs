//! The model pick (both layers) and its sizing. The candidates are the catalog's LLM entries (the
//! built-in candidates stand in without a catalog); the pick is, in order, the preference in
//! `data/models.json` (matched by name or Hugging Face repository), the catalog's own
//! `autodeploy: true` entries, then the largest entry that fits; none → a refusal naming each
//! entry and why. A vLLM pick's KV cache is never raised above the catalog's; its pod memory is
//! raised to what weights + cache + working headroom need; `--max-model-len` is written whenever
//! one request at the served context needs more KV than the cache holds.

use crate::facts::{self, Facts, GIB, KV_CACHE_ENV, MAX_MODEL_LEN};
use fit::GIB as GIB_BYTES;

use super::catalog::{Pinned, whole_gib};
use super::cpu_dtype::{self, Verdict as DtypeVerdict};
use super::data::{self, Candidate};
use super::decision::{Choice, Decision, ModelEdit, Value};
use super::fit::{self, Architecture, FitDoc, Target};
use super::hf::Access;
use crate::settings::Layer;

fn largest_node_gib(f: &Facts) -> (f64, String) {
    let mut best = (0.0, String::from("(none)"));
    for n in &f.nodes {
        if let Some(m) = n.capacity.get("memory").and_then(|m| facts::parse_quantity(m)) {
            let gib = m / GIB;
            if gib > best.0 {
                best = (gib, n.name.clone());
            }
        }
    }
    best
}

fn fmt_gib(v: f64) -> String {
    if (v - v.round()).abs() < 0.05 { format!("{:.0}", v.round()) } else { format!("{v:.1}") }
}

/// Which fit decides, and for eas's own, the budget it sized against.
fn fit_fact(f: &Facts, fit: Option<&facts::Fit>) -> String {
    match fit.map(|fit| fit.source.as_deref()) {
        None => "no fit document (memory alone decides)".into(),
        Some(Some(fit::SOURCE_EAS)) => match fit::budget(f) {
            Some(b) => format!(
                "eas fit on node {}: {} GiB budget ({} GiB allocatable, {} pod requests, {} GiB headroom)",
                b.node,
                fmt_gib(b.budget_bytes as f64 / GIB),
                fmt_gib(b.allocatable_bytes as f64 / GIB),
                b.pod_requests_bytes
                    .map(|r| format!("{} GiB", fmt_gib(r as f64 / GIB)))
                    .unwrap_or_else(|| "unknown".into()),
                fmt_gib(b.headroom_bytes as f64 / GIB)
            ),
            None => "eas fit: no node a model may be scheduled on".into(),
        },
        Some(Some(other)) => format!("{other} document present"),
        Some(None) => "fit document present".into(),
    }
}

/// A model eas may pick or be given: a catalog LLM entry (or a built-in candidate standing in).
struct Pickable<'a> {
    target: &'a Target,
    autodeploy: bool,
    cpu: Option<f64>,
    /// The preference row it matches (EAT's default or a fallback), by name or repository.
    pref: Option<&'a Candidate>,
    arch: Option<&'a Architecture>,
    /// What Hugging Face said about downloading its weights, when it was asked.
    download: Option<Access>,
    /// What the landing node's CPU lets vLLM run it in (`None`: not a vLLM entry, or no node).
    dtype: Option<DtypeVerdict>,
}

impl Pickable<'_> {
    fn name(&self) -> &str {
        &self.target.name
    }
}

fn pickables<'a>(targets: &'a [Target], catalog: Option<&Pinned>) -> Vec<Pickable<'a>> {
    let models = data::models();
    targets
        .iter()
        .map(|t| {
            let entry = catalog.and_then(|c| c.catalog.entry(&t.name));
            Pickable {
                target: t,
                autodeploy: entry.is_some_and(|e| e.autodeploy),
                // No catalog read: EI's llm category default stands in, as for memory.
                cpu: match catalog {
                    Some(_) => entry.and_then(|e| e.cpu),
                    None => Some(models.category_cpu),
                },
                pref: models.preference(&t.name, &t.model_id),
                arch: t.arch.as_ref().ok().filter(|_| t.runtime == "vllm"),
                download: None,
                dtype: None,
            }
        })
        .collect()
}

/// Each vLLM target's dtype verdict on the landing node; a dtype eas writes resizes its figures
/// (the pod is sized with the dtype written).
fn dtypes(f: &Facts, targets: &mut [Target]) -> Vec<(String, DtypeVerdict)> {
    let Some(n) = fit::landing_node(&f.nodes) else { return Vec::new() };
    let mut out = Vec::new();
    for t in targets.iter_mut().filter(|t| t.runtime == "vllm") {
        let quant = t.arch.as_ref().ok().and_then(|a| a.quantization.clone());
        let v = cpu_dtype::decide(&n.name, &n.labels, t.dtype.as_deref(), quant.as_deref());
        if let (DtypeVerdict::Write { to, .. }, Ok(a)) = (&v, &mut t.arch)
            && let Some(b) = cpu_dtype::bytes(to)
        {
            *a = a.in_dtype(b);
        }
        out.push((t.name.clone(), v));
    }
    out
}

/// Whether a model can be picked automatically, and why not. `as_preference`: by the
/// preference rule, which also needs the host memory EAT documents for it.
fn verdict(p: &Pickable, mem: f64, fit: Option<&facts::Fit>, own: &FitDoc, as_preference: bool) -> Result<(), String> {
    // vLLM's CPU backend cannot run it on the landing node's CPU.
    if let Some(DtypeVerdict::Cannot(why)) = &p.dtype {
        return Err(format!("{}: {why}", p.name()));
    }
    // The install would fail downloading it (Hugging Face itself refused this token).
    if let Some(Access::Refused { cause, fix }) = &p.download {
        return Err(format!("{}: {cause} ({fix})", p.name()));
    }
    if let Some(c) = p.pref.filter(|_| as_preference)
        && mem + 1e-9 < c.host_memory_gib
    {
        return Err(format!("{} needs {} GiB of host memory", p.name(), fmt_gib(c.host_memory_gib)));
    }
    let own_why = own.candidates.get(p.name()).map(|e| e.why.clone()).unwrap_or_default();
    let external = fit.and_then(|f| f.source.as_deref()) != Some(fit::SOURCE_EAS);
    match fit.map(|f| f.candidates.get(p.name())) {
        None => Ok(()),
        Some(None) if own_why.is_empty() || external => Err(format!("{}: no fit verdict", p.name())),
        Some(None) => Err(format!("{}: no fit verdict ({own_why})", p.name())),
        Some(Some(v)) if !v.fits && !external => {
            let sized = own.candidates.get(p.name()).is_some_and(|e| e.numbers.is_some());
            let what = if sized { "does not fit" } else { "no fit verdict" };
            Err(format!("{}: {what}: {own_why}", p.name()))
        }
        Some(Some(v)) if !v.fits => Err(format!("{}: fit says it does not fit", p.name())),
        Some(Some(_)) => Ok(()),
    }
}

/// The model pick for either layer and its sizing. `Err` is a refusal. `forced`: `--model`;
/// `kept`: the model the last completed run deployed, kept unless it no longer fits ([`kept`]).
pub fn pick(
    f: &Facts,
    fit: Option<&facts::Fit>,
    (forced, kept): (Option<&str>, Option<&str>),
    catalog: Option<&Pinned>,
    (hf_cache, downloads): (Option<&std::path::Path>, &[(String, Access)]),
    layer: &Layer,
    d: &mut Decision,
) -> Result<(), String> {
    let mut targets = Target::for_catalog(catalog.map(|c| &c.catalog), hf_cache);
    let verdicts = dtypes(f, &mut targets);
    let own = fit::compute_for(f, &targets);
    // Hugging Face figures that could not be sized with, and nodes that cannot be, each said once.
    d.warnings.extend(targets.iter().filter_map(|t| t.arch_warning.clone()));
    d.warnings.extend(fit::unsizable(&f.nodes));
    let mut list = pickables(&targets, catalog);
    for p in &mut list {
        p.download = downloads.iter().find(|(id, _)| *id == p.target.model_id).map(|(_, a)| a.clone());
        p.dtype = verdicts.iter().find(|(n, _)| n == p.name()).map(|(_, v)| v.clone());
    }
    let (mem, node) = largest_node_gib(f);
    let facts_line = format!("largest node {node} {} GiB; {}", fmt_gib(mem), fit_fact(f, fit));
    if let Some(c) = catalog {
        d.choices.push(Choice {
            fact: format!("EI catalog {}: LLM entries {}", c.describe(), c.catalog.llm_names().join(", ")),
            choice: "models are picked from this catalog; its KV cache is the ceiling".into(),
            source: "ei-catalog-shape".into(),
        });
    }

    let picked: &Pickable = if let Some(name) = forced {
        let p = list.iter().find(|p| p.name() == name).ok_or_else(|| format!("--model {name}: not a candidate"))?;
        match &p.download {
            Some(Access::Refused { cause, fix }) => {
                return Err(format!("--model {name}: the install cannot download it: {cause}; {fix}"));
            }
            Some(Access::Unknown(why)) => d.warnings.push(format!("--model {name}: download not checked: {why}")),
            _ => {}
        }
        if let Some(DtypeVerdict::Cannot(why)) = &p.dtype {
            return Err(format!("--model {name}: vLLM's CPU backend cannot run it here: {why}"));
        }
        let why = match verdict(p, mem, fit, &own, true) {
            Ok(()) => String::new(),
            Err(e) => {
                d.warnings.push(format!("--model {name} overrides the pick although {e}"));
                format!("; warning: {e}")
            }
        };
        d.choices.push(Choice {
            fact: format!("--model {name}; {facts_line}"),
            choice: format!("model: {name} (forced{why})"),
            source: forced_source(p, catalog),
        });
        p
    } else {
        // The installed model first: when it cannot be kept, the pick's fact says why.
        let kept = kept.map(|name| {
            let p = list.iter().find(|p| p.name() == name);
            // The pick as it would be made now, on a copy: only its line is read.
            let mut now = d.clone();
            let would = auto_pick(&list, catalog, mem, fit, &own, &facts_line, &mut now).ok().and_then(|_| {
                now.choices.iter().rev().find_map(|c| c.choice.strip_prefix("model: ").map(str::to_string))
            });
            let among = match catalog {
                Some(c) => format!("an LLM entry of the EI catalog {}", c.describe()),
                None => "one of the built-in candidates".into(),
            };
            let checked = p.map(|p| verdict(p, mem, fit, &own, false));
            let source = p.map(|p| forced_source(p, catalog)).unwrap_or_default();
            let line = super::kept::keep(name, &among, checked, would.as_deref(), (&facts_line, source))?;
            d.choices.push(line);
            // Kept only as a candidate: `keep` said why not otherwise.
            p.ok_or_else(|| format!("the installed model {name} is not a candidate"))
        });
        let p = match kept {
            Some(Ok(p)) => p,
            Some(Err(why)) => auto_pick(&list, catalog, mem, fit, &own, &format!("{why}; {facts_line}"), d)?,
            None => auto_pick(&list, catalog, mem, fit, &own, &facts_line, d)?,
        };
        if let Some(Access::Unknown(why)) = &p.download {
            d.warnings.push(format!("{}: download not checked: {why}", p.name()));
        }
        p
    };
    deploy_path(picked.name(), layer, d);
    unconfirmed(picked, d);
    write_dtype(picked, d);
    if picked.target.runtime == "vllm"
        && let Some(n) = fit::landing_node(&f.nodes)
        && let Some(w) = cpu_dtype::image_isa_warning(&n.name, &n.labels)
    {
        d.warnings.push(w);
    }
    size_pick(f, picked, fit, d)
}

/// The source of a model named rather than picked (`--model`, or the installed one kept): the
/// catalog's shape, else the built-in candidate's row.
fn forced_source(p: &Pickable, catalog: Option<&Pinned>) -> String {
    match (p.pref, catalog) {
        (_, Some(_)) => "ei-catalog-shape".to_string(),
        (Some(c), None) => c.source.clone(),
        (None, None) => unreachable!("without a catalog every candidate is a preference row"),
    }
}

/// A pick sized with data/models.json's figures says that Hugging Face did not confirm them, and
/// why: the same catalog may pick otherwise once the model's own files are read (online).
fn unconfirmed(p: &Pickable, d: &mut Decision) {
    if p.arch.is_none() || p.target.arch_from != "data/models.json" {
        return;
    }
    let why = match &p.download {
        None => "Hugging Face was not asked (--offline, or eas config)".to_string(),
        Some(Access::Unknown(w)) => format!("no answer from Hugging Face: {w}"),
        Some(_) => "its files were not found in the Hugging Face cache".to_string(),
    };
    d.warnings.push(format!(
        "{}: picked and sized with data/models.json's figures for {} (each cited there), which Hugging Face did not confirm: {why}",
        p.name(),
        p.target.model_id
    ));
}

/// The pick's `--dtype` on the landing node's CPU: kept, written (and sized with), or unknown
/// (a warning, the catalog's kept).
fn write_dtype(p: &Pickable, d: &mut Decision) {
    let name = p.name().to_string();
    let source = cpu_dtype::rules().source.clone();
    match &p.dtype {
        Some(DtypeVerdict::Keep { dtype: Some(dt), why }) => d.choices.push(Choice {
            fact: format!("{name} asks --dtype {dt}; {why}"),
            choice: format!("dtype: the catalog's {dt} kept"),
            source,
        }),
        Some(DtypeVerdict::Write { from, to, why }) => {
            let bytes = cpu_dtype::bytes(to).unwrap_or(0);
            d.choices.push(Choice {
                fact: format!("{name} asks --dtype {from}; {why}"),
                choice: format!(
                    "models.yaml {name} args_append: [\"--dtype\", \"{to}\"] (sized with {bytes} bytes per element)"
                ),
                source,
            });
            set_arg(edit(d, &name), "--dtype", to);
        }
        Some(DtypeVerdict::Unknown(why)) => {
            let dt = p.target.dtype.as_deref().unwrap_or("(the model's own)");
            d.warnings.push(format!("{name}: {why}; --dtype {dt} kept as the catalog writes it"));
        }
        _ => {}
    }
}

/// Sets `flag value` in an entry's `args_append`, replacing an earlier value of the same flag.
fn set_arg(e: &mut ModelEdit, flag: &str, value: &str) {
    if let Some(i) = e.args_append.iter().position(|a| a == flag).filter(|i| i + 1 < e.args_append.len()) {
        e.args_append[i + 1] = value.to_string();
    } else {
        e.args_append.extend([flag.to_string(), value.to_string()]);
    }
}

/// The automatic pick: the preference, then the catalog's autodeploy entries, then the largest
/// entry (by weights) that fits. None fits: a refusal naming every entry and why.
fn auto_pick<'a, 'b>(
    list: &'b [Pickable<'a>],
    catalog: Option<&Pinned>,
    mem: f64,
    fit: Option<&facts::Fit>,
    own: &FitDoc,
    facts_line: &str,
    d: &mut Decision,
) -> Result<&'b Pickable<'a>, String> {
    let models = data::models();
    let mut reasons: Vec<String> = Vec::new();
    let noted = |reasons: &mut Vec<String>, r: String| {
        if !reasons.contains(&r) {
            reasons.push(r);
        }
    };
    let choose = |d: &mut Decision, p: &Pickable, rule: String, source: String, reasons: &[String]| {
        let rejected = if reasons.is_empty() { String::new() } else { format!("; {}", reasons.join("; ")) };
        d.choices.push(Choice {
            fact: format!("{facts_line}{rejected}"),
            choice: format!("model: {} ({rule})", p.name()),
            source,
        });
    };
    // 1. The preference (EAT's documented default, then its fallbacks), matched by name or id.
    for c in &models.candidates {
        let Some(p) = list.iter().find(|p| p.pref.is_some_and(|r| r.name == c.name)) else {
            noted(&mut reasons, format!("{} ({}) is not in the catalog", c.name, c.model_id));
            continue;
        };
        match verdict(p, mem, fit, own, true) {
            Ok(()) => {
                let how = if p.name() == c.name { String::new() } else { format!(" {} by model_id", c.name) };
                choose(d, p, format!("rule: preference, EAT's {}{how}", c.role), c.source.clone(), &reasons);
                return Ok(p);
            }
            Err(e) => noted(&mut reasons, e),
        }
    }
    // 2. The catalog's own autodeploy: true entries, in its order.
    for p in list.iter().filter(|p| p.autodeploy) {
        match verdict(p, mem, fit, own, false) {
            Ok(()) => {
                choose(d, p, "rule: the catalog's autodeploy: true".into(), "ei-autodeploy".into(), &reasons);
                return Ok(p);
            }
            Err(e) => noted(&mut reasons, e),
        }
    }
    // 3. The largest entry that fits, by weights (an unknown architecture has no size).
    let mut fitting: Vec<&Pickable> = Vec::new();
    for p in list {
        match (verdict(p, mem, fit, own, false), p.arch) {
            (Ok(()), Some(_)) => fitting.push(p),
            (Ok(()), None) => {
                noted(&mut reasons, format!("{}: architecture unknown, never picked automatically", p.name()))
            }
            (Err(e), _) => noted(&mut reasons, e),
        }
    }
    if let Some(p) = fitting.into_iter().max_by_key(|p| p.arch.map(Architecture::weights_bytes)) {
        let w = p.arch.map(|a| fmt_gib(a.weights_bytes() as f64 / GIB)).unwrap_or_default();
        choose(
            d,
            p,
            format!("rule: the largest entry that fits, {w} GiB of weights"),
            "memory-is-limit".into(),
            &reasons,
        );
        return Ok(p);
    }
    let at =
        catalog.map(|c| format!("the EI catalog {}", c.describe())).unwrap_or_else(|| "the built-in candidates".into());
    Err(format!(
        "no model of {at} fits this cluster ({facts_line}): {}; choose one with --model or give the node more memory",
        reasons.join("; ")
    ))
}

/// The key EAT would read the model list from, were a reader found (none is in any stored copy).
pub const EAT_MODELS_KEY: &str = "agent_toolkit_models";

/// The fact of the agent-toolkit layer's deploy-path line before the EAT tree is searched.
const EAT_NOT_CHECKED: &str = "EAT's reader of agent_toolkit_models not checked here";

/// The deploy path once the pinned EAT tree (`at`, `owner/repo@sha7`) was searched for readers of
/// `agent_toolkit_models` with data/knobs.json's pathspecs (`readers`: the files found). With
/// one, EAT's key deploys the pick and EI's switch and autodeploy are taken back; without, EI's
/// path stays and its line names the search. Only the agent-toolkit layer changes. Pure: the
/// search is `up::knob_audit::eat_model_readers`; `eas up`'s config plan half wires the two.
pub fn prove_deploy_path(d: &mut Decision, readers: &[(String, super::components::OnPath)], at: &str) {
    use super::components::OnPath;
    if d.layer != Layer::AgentToolkit {
        return;
    }
    let Some(i) = d.choices.iter().position(|c| c.fact.contains(EAT_NOT_CHECKED)) else { return };
    let pick =
        d.choices[i].fact.split("model ").nth(1).and_then(|r| r.split(';').next()).unwrap_or_default().to_string();
    if readers.is_empty() {
        d.choices[i].fact = format!(
            "layer agent-toolkit, model {pick}; no file of {at} reads {EAT_MODELS_KEY} (data/knobs.json's pathspecs); \
             EI's deploy path is proved by roles/llm_services"
        );
        return;
    }
    // A reader proves EAT's path only when the install runs it: its role is an enabled
    // component of the layer (or a layer below it).
    let (mut how, mut why) = (Vec::new(), Vec::new());
    for (r, v) in readers {
        match v {
            OnPath::Yes(h) => how.push(format!("{r} ({h})")),
            OnPath::No(w) => why.push(format!("{r}: {w}")),
        }
    }
    if how.is_empty() {
        d.choices[i].fact = format!(
            "layer agent-toolkit, model {pick}; {EAT_MODELS_KEY} is read in {at} off the install path ({}); \
             EI's deploy path is proved by roles/llm_services",
            why.join("; ")
        );
        return;
    }
    d.choices[i] = Choice {
        fact: format!("layer agent-toolkit, model {pick}; {EAT_MODELS_KEY} is read by {} in {at}", how.join(", ")),
        choice: format!("deploy path: EAT's {EAT_MODELS_KEY}: [{pick:?}]; llm_services_deploy_models not written"),
        source: "ei-deploy-switch".into(),
    };
    d.overrides.retain(|(k, _)| *k != "llm_services_deploy_models" && *k != "model_deploy_strict");
    d.choices.retain(|c| {
        !(c.fact.starts_with(EAT_MODELS_KEY)
            || c.choice.ends_with(" autodeploy: true")
            || c.choice.starts_with("model_deploy_strict"))
    });
    for e in &mut d.model_edits {
        e.autodeploy = false;
    }
    d.model_edits.retain(|e| *e != ModelEdit { name: e.name.clone(), ..ModelEdit::default() });
}

/// The deploy path the pinned trees prove. EI's install deploys the catalog entries marked
/// `autodeploy: true` when `llm_services_deploy_models` is on; no stored EAT file reads
/// `agent_toolkit_models`, so on the agent-toolkit layer it is written as a defensive key beside
/// EI's path, and the decision says EAT's reader was not checked here.
fn deploy_path(name: &str, layer: &Layer, d: &mut Decision) {
    let fact = if *layer == Layer::AgentToolkit {
        format!(
            "layer agent-toolkit, model {name}; {EAT_NOT_CHECKED} (no stored EAT file reads it); EI's deploy path is \
             proved by roles/llm_services"
        )
    } else {
        format!("layer inference, model {name}; EI's config.yaml ships llm_services_deploy_models: false")
    };
    d.choices.push(Choice {
        fact,
        choice: "llm_services_deploy_models: true".into(),
        source: "ei-deploy-switch".into(),
    });
    d.overrides.push(("llm_services_deploy_models", Value::Bool(true)));
    if *layer == Layer::AgentToolkit {
        d.choices.push(Choice {
            fact: format!("{EAT_MODELS_KEY} has no proved reader"),
            choice: format!("agent_toolkit_models: [{name:?}] (defensive: harmless when unread)"),
            source: "ei-deploy-switch".into(),
        });
        d.overrides.push(("agent_toolkit_models", Value::List(vec![name.to_string()])));
    }
    // EI's deploy loop records a failed `model-manager deploy` and carries on unless this is on
    // (Mushtaq-BGA/enterprise-inference@1e10d1a deploy_models.yaml:146-151; the role's default is
    // false at intel/enterprise-inference@90da478): off, the installer exits 0 without the model
    // and verify waits its whole window for it (issue 28 item 2).
    d.choices.push(Choice {
        fact: "EI's deploy loop fails the install on a failed model deploy only when model_deploy_strict is on \
               (the role's default: false)"
            .into(),
        choice: "model_deploy_strict: true (a model that fails to deploy fails the install, with model-manager's \
                 reason in its log)"
            .into(),
        source: "ei-deploy-strict".into(),
    });
    d.overrides.push(("model_deploy_strict", Value::Bool(true)));
    d.choices.push(Choice {
        fact: format!("EI's install deploys only catalog entries with autodeploy: true; {name} is the pick"),
        choice: format!("models.yaml {name} autodeploy: true"),
        source: "ei-autodeploy".into(),
    });
    edit(d, name).autodeploy = true;
}

fn edit<'d>(d: &'d mut Decision, name: &str) -> &'d mut ModelEdit {
    if let Some(i) = d.model_edits.iter().position(|e| e.name == name) {
        return &mut d.model_edits[i];
    }
    d.model_edits.push(ModelEdit { name: name.to_string(), ..ModelEdit::default() });
    d.model_edits.last_mut().expect("just pushed")
}

/// The pick's KV cache, pod memory, CPU and `--max-model-len` (vLLM entries only).
fn size_pick(f: &Facts, p: &Pickable, fit: Option<&facts::Fit>, d: &mut Decision) -> Result<(), String> {
    let name = p.name().to_string();
    let Some(ceiling) = p.target.kv_ceiling_gib else {
        d.choices.push(Choice {
            fact: format!("the catalog sets no {KV_CACHE_ENV} for {name} (runtime {})", p.target.runtime),
            choice: "KV cache: none written (the entry's server sizes its own)".into(),
            source: "ei-catalog-kv".into(),
        });
        cpu(f, p, d);
        return Ok(());
    };
    let kv_source =
        p.pref.filter(|_| p.target.kv_ceiling_gib == Some(fit::catalog_cache_gib())).map(|c| c.kv_source.clone());
    let kv_source = kv_source.unwrap_or_else(|| "ei-catalog-kv".into());
    let verdict = fit.and_then(|fit| fit.candidates.get(&name)).filter(|v| v.fits);
    let from_fit = verdict.and_then(|v| v.env.get(KV_CACHE_ENV)).and_then(|t| facts::parse_gib(t).map(|g| (t, g)));
    let cache = match from_fit {
        None => {
            d.choices.push(Choice {
                fact: format!("no fit sizing for {name}"),
                choice: format!("KV cache: catalog's {ceiling} GiB kept"),
                source: kv_source.clone(),
            });
            ceiling
        }
        Some((text, kv)) => {
            let whole = whole_gib(kv);
            // vLLM reads the variable with int(...): fit's figure is rounded down, never up.
            let rounded = if (kv - whole as f64).abs() > f64::EPSILON {
                format!(", rounded down to {whole} whole GiB")
            } else {
                String::new()
            };
            if whole >= ceiling {
                d.choices.push(Choice {
                    fact: format!("fit {KV_CACHE_ENV}={text} for {name}{rounded} >= catalog {ceiling}"),
                    choice: format!("KV cache: catalog's {ceiling} GiB kept (fit may lower it, never raise it)"),
                    source: "memory-is-limit".into(),
                });
                ceiling
            } else if whole == 0 {
                return Err(format!(
                    "fit sizes {name}'s KV cache at {text} GiB, under one whole GiB: vLLM reads {KV_CACHE_ENV} as whole \
                     GiB and 0 leaves the size to vLLM; pick a smaller model (--model) or give the node more memory"
                ));
            } else {
                d.choices.push(Choice {
                    fact: format!("fit {KV_CACHE_ENV}={text} for {name} < catalog {ceiling}{rounded}"),
                    choice: format!("models.yaml {name} env {KV_CACHE_ENV}: \"{whole}\""),
                    source: if rounded.is_empty() { "vllm-kv-space" } else { "vllm-kv-int" }.into(),
                });
                edit(d, &name).env.push((KV_CACHE_ENV.to_string(), whole.to_string()));
                whole
            }
        }
    };
    // A context the winning fit sized (k3d-gpu fit writes one with every cache) is kept where it
    // is shorter than what vLLM would otherwise serve: fit wins, as its warnings say.
    let fit_len = verdict.and_then(|v| v.max_model_len()).and_then(|l| l.parse::<u64>().ok());
    match p.arch {
        Some(arch) => pod_memory_and_context(f, p, arch, cache, fit_len, d),
        None => {
            d.warnings.push(format!(
                "{name}: architecture unknown ({}): its pod memory and context were not checked",
                p.target.model_id
            ));
            // An external fit that lowered the cache sized a context for it: keep that one.
            if let Some(len) = verdict.and_then(|v| v.max_model_len()).filter(|_| cache < ceiling) {
                push_len(d, &name, len, format!("fit's {MAX_MODEL_LEN} {len} for the lowered cache"));
            }
        }
    }
    cpu(f, p, d);
    Ok(())
}

fn push_len(d: &mut Decision, name: &str, len: &str, fact: String) {
    d.choices.push(Choice {
        fact,
        choice: format!("models.yaml {name} args_append: [\"{MAX_MODEL_LEN}\", \"{len}\"]"),
        source: "vllm-kv-check".into(),
    });
    set_arg(edit(d, name), MAX_MODEL_LEN, len);
}

fn pod_memory_and_context(
    f: &Facts,
    p: &Pickable,
    arch: &Architecture,
    cache: u64,
    fit_len: Option<u64>,
    d: &mut Decision,
) {
    let name = p.name().to_string();
    let ctx = fit::context(arch, p.target.max_model_len);
    let kv = arch.kv_bytes_per_token();
    let needed = fit::needed_max_model_len(arch, ctx, cache);
    match (needed, fit_len.filter(|l| *l < ctx)) {
        (Some(len), other) if other.is_none_or(|o| o >= len) => {
            let fact = format!(
                "one request of {name}'s {ctx}-token context needs {} GiB of KV cache > {cache} GiB",
                fmt_gib(ctx.saturating_mul(kv) as f64 / GIB)
            );
            push_len(d, &name, &len.to_string(), fact);
        }
        (_, Some(len)) => {
            push_len(
                d,
                &name,
                &len.to_string(),
                format!("fit sized {name}'s cache for {MAX_MODEL_LEN} {len} < its {ctx}-token context"),
            );
        }
        (_, None) => {}
    }
    let need = fit::memory_gib(arch, cache);
    let budget = fit::budget(f).map(|b| b.budget_bytes);
    let parts = format!(
        "weights {} GiB ({}'s figures: {}) + {cache} GiB KV cache + {} GiB working headroom (an estimate, not a \
         measurement: data/models.json pod_headroom_why)",
        fmt_gib(arch.weights_bytes() as f64 / GIB),
        p.target.model_id,
        p.target.arch_from,
        data::models().pod_headroom_gib
    );
    let catalog = p.target.pod_memory_bytes;
    let too_small = catalog.is_none_or(|m| m < need.saturating_mul(GIB_BYTES));
    let too_big = matches!((catalog, budget), (Some(m), Some(b)) if m > b);
    if !too_small && !too_big {
        d.choices.push(Choice {
            fact: format!("{parts} = {need} GiB"),
            choice: format!("pod memory: catalog's {} GiB kept", fmt_gib(catalog.unwrap_or(0) as f64 / GIB)),
            source: "memory-is-limit".into(),
        });
        return;
    }
    if budget.is_some_and(|b| need * GIB_BYTES > b) {
        d.warnings.push(format!(
            "{name} needs {need} GiB of pod memory ({parts}), more than the node's {} GiB budget",
            fmt_gib(budget.unwrap_or(0) as f64 / GIB)
        ));
        return;
    }
    let was = catalog.map(|m| format!("{} GiB", fmt_gib(m as f64 / GIB))).unwrap_or_else(|| "none".into());
    d.choices.push(Choice {
        fact: format!(
            "{parts} = {need} GiB; the catalog's memory {was} (EI renders it as the pod's request and limit)"
        ),
        choice: format!("models.yaml {name} memory: \"{need}Gi\""),
        source: "memory-is-limit".into(),
    });
    edit(d, &name).memory = Some(format!("{need}Gi"));
}

/// The entry's CPU (EI renders it as request and limit) lowered to what the landing node can
/// schedule (allocatable minus its pods' requests, where the facts carry them), never raised.
fn cpu(f: &Facts, p: &Pickable, d: &mut Decision) {
    let Some(want) = p.cpu else { return };
    let Some(n) = fit::landing_node(&f.nodes) else { return };
    let Some(alloc) = n.allocatable.get("cpu").and_then(|c| facts::parse_quantity(c)) else { return };
    let requested = n.pod_requests.as_ref().and_then(|r| r.get("cpu")).and_then(|c| facts::parse_quantity(c));
    let free = (alloc - requested.unwrap_or(0.0)).floor();
    if want <= free {
        return;
    }
    let req =
        requested.map(|r| format!(" - {r} requested")).unwrap_or_else(|| " (pod CPU requests not gathered)".into());
    let min = data::models().min_cpu;
    if free < min {
        d.warnings.push(format!(
            "{} asks cpu {want}; node {} schedules {free} ({alloc} allocatable{req}), under the {min} cores vLLM \
             needs (data/models.json min_cpu_why): cpu not lowered, and the model's pod would stay Pending; free \
             cores on that node or give it more",
            p.name(),
            n.name
        ));
        return;
    }
    d.choices.push(Choice {
        fact: format!("{} asks cpu {want}; node {} schedules {free} ({alloc} allocatable{req})", p.name(), n.name),
        choice: format!("models.yaml {} cpu: {free}", p.name()),
        source: "memory-is-limit".into(),
    });
    edit(d, p.name()).cpu = Some(format!("{free}"));
}
