//! An Ape-X CartPole actor in plain Rust, for engram-apex's C++ learner.
//!
//! It does what the C++ actor (agents/apex/actor.cpp) does, from the tables'
//! layout in engram's README ("Reference agents"): M CartPole-v1 envs, the
//! learner's dueling MLP (4-128-128, value 1, advantage 2) run forward on
//! each, env i of N exploring with epsilon 0.4^(1 + 7 i/(N-1)), 3-step
//! transitions with the discount each really had, initial priorities
//! |target - Q| from its own network, transitions sent 50 or more at a time
//! with the episodes that ended since (Ape-X's local buffer), parameters
//! pulled every 400 frames.
//!
//!     engram-apex --actors 0 --out /tmp/apex &
//!     cargo run --release --example apex_actor -- --socket /tmp/apex/engram.sock --actor-id 0 --actors 2
//!
//! It runs until SIGTERM. When the server goes away (an engramd restarted,
//! or the learner's embedded server gone with it) it connects again as soon
//! as the server answers with its tables, trying for --reconnect-s seconds
//! (60) before it gives up, and says once what the outage cost.
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use engram::{bytes, Client, Column, Dtype, Error, SampleOptions, Table, WriterOptions};
use engram_sys as sys;

const GAMMA: f32 = 0.99;
const N_STEP: usize = 3;
const PULL_EVERY: u64 = 400;
// Transitions a send carries at least, as the C++ actor's: one burst wakes
// each table's owner once.
const LOCAL_BATCH: usize = 50;
const H: usize = 128;
const MAX_STEPS: u32 = 500;

/// splitmix64: a small generator with no crates.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e3779b97f4a7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
        z ^ (z >> 31)
    }
    fn uniform(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// CartPole-v1 (Gymnasium's constants): reward 1 a step, terminated past
/// 2.4 or 12 degrees, truncated at 500 steps.
struct CartPole {
    s: [f64; 4],
    steps: u32,
}
impl CartPole {
    fn reset(&mut self, rng: &mut Rng) {
        for v in self.s.iter_mut() {
            *v = rng.uniform() * 0.1 - 0.05;
        }
        self.steps = 0;
    }
    fn obs(&self) -> [f32; 4] {
        [self.s[0] as f32, self.s[1] as f32, self.s[2] as f32, self.s[3] as f32]
    }
    /// (terminated, truncated)
    fn step(&mut self, action: i32) -> (bool, bool) {
        let [x, x_dot, theta, theta_dot] = self.s;
        let force = if action == 1 { 10.0 } else { -10.0 };
        let (cos_t, sin_t) = (theta.cos(), theta.sin());
        let temp = (force + 0.05 * theta_dot * theta_dot * sin_t) / 1.1;
        let theta_acc = (9.8 * sin_t - cos_t * temp) / (0.5 * (4.0 / 3.0 - 0.1 * cos_t * cos_t / 1.1));
        let x_acc = temp - 0.05 * theta_acc * cos_t / 1.1;
        self.s = [x + 0.02 * x_dot, x_dot + 0.02 * x_acc, theta + 0.02 * theta_dot, theta_dot + 0.02 * theta_acc];
        self.steps += 1;
        let limit = 12.0 * 2.0 * std::f64::consts::PI / 360.0;
        let terminated = self.s[0].abs() > 2.4 || self.s[2].abs() > limit;
        (terminated, !terminated && self.steps >= MAX_STEPS)
    }
}

/// The learner's network from the parameter table's floats, in LibTorch's
/// order: fc1 [128x4] and bias, fc2 [128x128] and bias, value [1x128] and
/// bias, advantage [2x128] and bias. Q = V + A - mean(A).
struct DuelingQ {
    p: Vec<f32>,
}
const SIZE: usize = H * 4 + H + H * H + H + H + 1 + 2 * H + 2;
impl DuelingQ {
    fn q(&self, obs: &[f32; 4]) -> [f32; 2] {
        let (w1, rest) = self.p.split_at(H * 4);
        let (b1, rest) = rest.split_at(H);
        let (w2, rest) = rest.split_at(H * H);
        let (b2, rest) = rest.split_at(H);
        let (wv, rest) = rest.split_at(H);
        let (bv, rest) = rest.split_at(1);
        let (wa, ba) = rest.split_at(2 * H);
        let mut h1 = [0f32; H];
        for i in 0..H {
            let s: f32 = (0..4).map(|k| w1[i * 4 + k] * obs[k]).sum::<f32>() + b1[i];
            h1[i] = s.max(0.0);
        }
        let mut h2 = [0f32; H];
        for i in 0..H {
            let row = &w2[i * H..(i + 1) * H];
            let s: f32 = row.iter().zip(&h1).map(|(w, x)| w * x).sum::<f32>() + b2[i];
            h2[i] = s.max(0.0);
        }
        let dot = |w: &[f32]| w.iter().zip(&h2).map(|(a, b)| a * b).sum::<f32>();
        let v = dot(wv) + bv[0];
        let a = [dot(&wa[..H]) + ba[0], dot(&wa[H..]) + ba[1]];
        let mean = (a[0] + a[1]) / 2.0;
        [v + a[0] - mean, v + a[1] - mean]
    }
}

/// The newest parameters if their version is not `have`.
fn read_params(table: &Table<'_>, have: i64) -> Result<Option<(i64, Vec<f32>)>, Error> {
    let mut o = SampleOptions::new(1);
    o.timeout_ms = 0;
    let batch = match table.sample_view(&o) {
        Ok(b) => b,
        Err(e) if e.code() == sys::ENGRAM_E_RATE_LIMITED => return Ok(None),
        Err(e) => return Err(e),
    };
    let version = batch.views::<i64>(0, 0)?[0][0];
    if version == have {
        return Ok(None);
    }
    Ok(Some((version, batch.views::<f32>(0, 1)?[0].to_vec())))
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_term(_: i32) {
    STOP.store(true, Ordering::Relaxed);
}

extern "C" {
    fn signal(signum: i32, handler: extern "C" fn(i32)) -> usize;
}

fn stopped() -> bool {
    STOP.load(Ordering::Relaxed)
}

/// The errors of a try while the server comes back: none there yet, its
/// tables not yet restored or created, or too busy to answer.
fn not_back_yet(e: &Error) -> bool {
    [sys::ENGRAM_E_DISCONNECTED, sys::ENGRAM_E_NOT_FOUND, sys::ENGRAM_E_CLOSED, sys::ENGRAM_E_TIMEOUT].contains(&e.code())
}

/// After the server went away: connects again until it answers with the
/// actor's tables, trying every 50 ms, doubling up to 2 s, for `limit`;
/// then one line on stderr for the outage. False if stopped or given up.
fn reconnect(client: &mut Client, socket: &str, id: usize, limit: Duration, lost: &str) -> Result<bool, Error> {
    let began = Instant::now();
    let secs = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0) % 86400;
    let at = format!("{:02}:{:02}:{:02} UTC", secs / 3600, secs / 60 % 60, secs % 60);
    let (mut wait, mut tries) = (Duration::from_millis(50), 0);
    while !stopped() && began.elapsed() < limit {
        tries += 1;
        let back = client.reconnect(Some(socket)).and_then(|_| {
            for name in ["params", "replay", "episodes"] {
                client.open_table(name)?;
            }
            Ok(())
        });
        match back {
            Ok(()) => {
                eprintln!("apex_actor {}: the server went away at {}; back after {:.1} s ({} {}); lost {}", id, at,
                          began.elapsed().as_secs_f64(), tries, if tries == 1 { "try" } else { "tries" }, lost);
                return Ok(true);
            }
            Err(e) if not_back_yet(&e) => {
                std::thread::sleep(wait);
                wait = (wait * 2).min(Duration::from_secs(2));
            }
            Err(e) => return Err(e),
        }
    }
    if !stopped() {
        eprintln!("apex_actor {}: the server went away at {} and was not back within {:?}", id, at, limit);
    }
    Ok(false)
}

struct Pending {
    obs: [f32; 4],
    action: i32,
    q: f32,
    reward: f32,
    scale: f32,
    steps: usize,
}

fn arg(args: &[String], name: &str, default: &str) -> String {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned().unwrap_or_else(|| default.to_string())
}

/// What the actor carries across connections: its envs, network and the
/// transitions and episodes not yet sent.
struct Actor {
    id: usize,
    first: usize,
    eps: Vec<f64>,
    rng: Rng,
    net: DuelingQ,
    version: i64,
    envs: Vec<CartPole>,
    pending: Vec<VecDeque<Pending>>,
    ret: Vec<f32>,
    len: Vec<i32>,
    last_pull: u64,
    frames: u64,
    // Transitions not sent yet, column by column, for append_items, and
    // the episodes ended since the last send (env, epsilon, return, length).
    o_: Vec<f32>,
    a_: Vec<i32>,
    r_: Vec<f32>,
    d_: Vec<f32>,
    n_: Vec<f32>,
    pr: Vec<f64>,
    ended: Vec<(i32, f32, f32, i32)>,
}

impl Actor {
    /// What was on its way to the server, dropped; its description.
    fn drop_unsent(&mut self) -> String {
        let lost = format!("{} transitions and {} episodes being written, and those the server had not applied",
                           self.a_.len(), self.ended.len());
        self.ended.clear();
        self.o_.clear();
        self.a_.clear();
        self.r_.clear();
        self.d_.clear();
        self.n_.clear();
        self.pr.clear();
        lost
    }

    /// Acts on one connection: opens the tables and writers, then steps
    /// the envs until SIGTERM (Ok) or an error (the server gone, say).
    fn act(&mut self, client: &Client) -> Result<(), Error> {
        let m = self.envs.len();
        let params = client.open_table("params")?;
        let replay = client.open_table("replay")?;
        let episodes = client.open_table("episodes")?;
        let obs4 = |n: &str| Column::new(n, Dtype::F32, &[4]);
        let mut wo = WriterOptions::new(vec![obs4("obs"), Column::new("action", Dtype::I32, &[]),
                                             Column::new("reward", Dtype::F32, &[]),
                                             Column::new("discount", Dtype::F32, &[]), obs4("next_obs")]);
        wo.chunk_length = 16; // 16 transitions a chunk, each its own item, as the C++ actors write them
        wo.max_item_steps = 1;
        let mut writer = client.writer(&wo)?;
        let mut episode_writer = client.writer(&WriterOptions::new(vec![
            Column::new("env", Dtype::I32, &[]), Column::new("epsilon", Dtype::F32, &[]),
            Column::new("return", Dtype::F32, &[]), Column::new("length", Dtype::I32, &[])]))?;
        while !stopped() {
            for j in 0..m {
                let obs = self.envs[j].obs();
                let q = self.net.q(&obs);
                let action = if self.rng.uniform() < self.eps[j] { (self.rng.next() % 2) as i32 } else { (q[1] > q[0]) as i32 };
                let (terminated, truncated) = self.envs[j].step(action);
                let next = self.envs[j].obs();
                self.pending[j].push_back(Pending { obs, action, q: q[action as usize], reward: 0.0, scale: 1.0, steps: 0 });
                for p in self.pending[j].iter_mut() {
                    p.reward += p.scale;
                    p.scale *= GAMMA;
                    p.steps += 1;
                }
                let end = terminated || truncated;
                while self.pending[j].front().map_or(false, |p| p.steps == N_STEP || end) {
                    let p = self.pending[j].pop_front().unwrap();
                    let discount = if terminated { 0.0 } else { p.scale };
                    let best = self.net.q(&next);
                    let td = p.reward + discount * best[0].max(best[1]) - p.q;
                    self.o_.extend_from_slice(&p.obs);
                    self.a_.push(p.action);
                    self.r_.push(p.reward);
                    self.d_.push(discount);
                    self.n_.extend_from_slice(&next);
                    self.pr.push(if td.is_finite() { td.abs() as f64 + 1e-6 } else { 1.0 });
                }
                self.ret[j] += 1.0;
                self.len[j] += 1;
                if end {
                    self.ended.push(((self.first + j) as i32, self.eps[j] as f32, self.ret[j], self.len[j]));
                    self.ret[j] = 0.0;
                    self.len[j] = 0;
                    self.envs[j].reset(&mut self.rng);
                }
            }
            self.frames += m as u64;
            let pull = self.frames - self.last_pull >= PULL_EVERY;
            if self.a_.len() >= LOCAL_BATCH || (pull && !self.a_.is_empty()) {
                // An episode's last transitions and its record leave together.
                writer.append_items(&[bytes(&self.o_), bytes(&self.a_), bytes(&self.r_), bytes(&self.d_), bytes(&self.n_)],
                                    self.a_.len() as u32, &replay, 1, Some(&self.pr))?;
                for &(env, e, r, l) in &self.ended {
                    episode_writer.append(&[bytes(&[env]), bytes(&[e]), bytes(&[r]), bytes(&[l])])?;
                    episode_writer.create_item(&episodes, 1, 1.0)?;
                }
                self.drop_unsent();
            }
            if pull {
                self.last_pull = self.frames;
                if let Some((v, p)) = read_params(&params, self.version)? {
                    self.version = v;
                    self.net.p = p;
                }
            }
        }
        Ok(())
    }
}

fn run(args: &[String], frames: &mut u64) -> Result<(), Error> {
    let socket = arg(args, "--socket", "");
    let id: usize = arg(args, "--actor-id", "0").parse().unwrap();
    let actors: usize = arg(args, "--actors", "1").parse().unwrap();
    let m: usize = arg(args, "--envs-per-actor", "16").parse().unwrap();
    let seed: u64 = arg(args, "--seed", "1").parse().unwrap();
    let reconnect_s: f64 = arg(args, "--reconnect-s", "60").parse().unwrap();
    let total = actors * m;
    let first = id * m;
    let eps: Vec<f64> = (0..m)
        .map(|j| if total <= 1 { 0.4 } else { 0.4f64.powf(1.0 + 7.0 * (first + j) as f64 / (total - 1) as f64) })
        .collect();
    let mut rng = Rng(seed.wrapping_mul(1_000_003).wrapping_add(7919 * id as u64 + 1));

    let mut client = Client::connect(Some(&socket))?;
    let (version, p) = {
        let params = loop {
            match client.open_table("params") {
                Ok(t) => break t,
                Err(e) if e.code() == sys::ENGRAM_E_NOT_FOUND => std::thread::sleep(Duration::from_millis(10)),
                Err(e) => return Err(e),
            }
        };
        loop {
            if stopped() {
                return Ok(());
            }
            if let Some(v) = read_params(&params, 0)? {
                break v;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    if p.len() != SIZE {
        eprintln!("apex_actor: the parameter table holds {} floats; CartPole's network has {}", p.len(), SIZE);
        std::process::exit(1);
    }
    let mut envs: Vec<CartPole> = (0..m).map(|_| CartPole { s: [0.0; 4], steps: 0 }).collect();
    for e in envs.iter_mut() {
        e.reset(&mut rng);
    }
    let mut actor = Actor {
        id, first, eps, rng, net: DuelingQ { p }, version, envs,
        pending: (0..m).map(|_| VecDeque::new()).collect(),
        ret: vec![0f32; m], len: vec![0i32; m], last_pull: 0, frames: 0,
        o_: vec![], a_: vec![], r_: vec![], d_: vec![], n_: vec![], pr: vec![], ended: vec![],
    };
    let result = loop {
        match actor.act(&client) {
            // The envs go on where they were; what was on its way to the
            // server is gone with it.
            Err(e) if e.code() == sys::ENGRAM_E_DISCONNECTED || e.code() == sys::ENGRAM_E_CLOSED => {
                let lost = actor.drop_unsent();
                match reconnect(&mut client, &socket, actor.id, Duration::from_secs_f64(reconnect_s), &lost) {
                    Ok(true) => continue,
                    Ok(false) => break Ok(()),
                    Err(e) => break Err(e),
                }
            }
            other => break other,
        }
    };
    *frames = actor.frames;
    result
}

fn main() {
    unsafe { signal(15, on_term) }; // SIGTERM: stop at the next step, and say the frames
    let args: Vec<String> = std::env::args().collect();
    let mut frames = 0u64;
    match run(&args, &mut frames) {
        Ok(()) => println!("apex_actor: {} frames", frames),
        // Gone before the first parameters.
        Err(e) if e.code() == sys::ENGRAM_E_DISCONNECTED || e.code() == sys::ENGRAM_E_CLOSED => {
            println!("apex_actor: {} frames; the learner's server went away", frames)
        }
        Err(e) => {
            eprintln!("apex_actor: {}", e);
            std::process::exit(1);
        }
    }
}
