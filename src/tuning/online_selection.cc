#include "tuning/online_selection.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <iomanip>
#include <limits>
#include <sstream>
#include <string_view>

#include "core/check.h"

namespace boostcomm::tuning {
namespace {

constexpr double kNoTime = std::numeric_limits<double>::infinity();
constexpr std::string_view kNative = "native";

// The model's choice among a class's candidates (by name, in the model's
// order): the first schedule; names.size() where there is none.
std::size_t modelChoice(const std::vector<std::string_view>& names) {
  return static_cast<std::size_t>(
      std::find_if(names.begin(), names.end(), [](std::string_view n) { return n != kNative; }) - names.begin());
}

// Whether a schedule's time displaces the model's choice's (faster by more
// than OnlineSelection::kModelKeepPercent).
bool displacesModel(double us, double modelUs) {
  return us < modelUs * (1.0 - OnlineSelection::kModelKeepPercent / 100.0);
}

std::string describeBytes(std::size_t bytes) {
  std::ostringstream os;
  if (bytes >= (std::size_t{1} << 20)) {
    os << (bytes >> 20) << " MiB";
  } else if (bytes >= 1024) {
    os << (bytes >> 10) << " KiB";
  } else {
    os << bytes << " B";
  }
  return os.str();
}

// The median of some times (of two, the faster; infinity: none).
double medianOf(std::vector<double> v) {
  std::erase_if(v, [](double x) { return !(x < kNoTime); });
  if (v.empty()) return kNoTime;
  std::sort(v.begin(), v.end());
  return v[(v.size() - 1) / 2];
}

// A time for the log: "451.4 ms", or "(no time)".
std::string msText(double us) {
  if (!(us < kNoTime)) return "(no time)";
  std::ostringstream os;
  os << std::fixed << std::setprecision(1) << us / 1000.0 << " ms";
  return os.str();
}

// Size class c's payloads, for the log: "8 MiB - 16 MiB".
std::string rangeOf(int cls) {
  const std::size_t lo = std::size_t{1} << cls;
  return describeBytes(lo) + " - " + (cls >= 63 ? std::string("16 EiB") : describeBytes(lo << 1));
}

}  // namespace

OnlineSelection::OnlineSelection(bool enabled, bool log, double nativeMarginPercent)
    : enabled_(enabled), log_(log), nativeMargin_(nativeMarginPercent / 100.0) {
  BC_INTERNAL(nativeMarginPercent > -100.0 && nativeMarginPercent < 100.0,
              "online selection: native margin " << nativeMarginPercent << "% (must lie in (-100%, 100%))");
}

int OnlineSelection::classOf(std::size_t bytes) { return std::bit_width(bytes) - 1; }

void OnlineSelection::startClass(ClassState& s, const algorithms::CollectiveSpec& spec,
                                 const tuning::ModelSelection& model, WireFormat wire) {
  // Every rank starts a class with the same call (same payload), so every
  // rank ranks the same candidates.
  const std::size_t bytes = spec.payloadBytes();
  s.started = true;
  s.firstBytes = bytes;
  s.candidates = model.trialCandidates(spec.collective, bytes, wire);
  s.rounds = model.bestPredictedUs(spec.collective, bytes, wire) >= kOneRoundUs ? 1 : kRounds;
  s.samples.assign(s.candidates.size(), {});
  s.agreedUs.assign(s.candidates.size(), kNoTime);
  s.dropped.assign(s.candidates.size(), false);
  s.racing.clear();
  for (std::size_t c = 0; c < s.candidates.size(); ++c) s.racing.push_back(c);
  if (s.candidates.empty()) {
    s.decided = true;  // fewer than two candidates: nothing to learn
  } else {
    CollectiveTrials& t = trials_[static_cast<std::size_t>(spec.collective)];
    if (t.classesRacing == 0 && t.checkEpochs == 0 && !t.checkpointDue) {
      if (t.checkWanted) {
        // Epochs were followed for a check waiting for its step: this
        // class's payload may be that step's next (DDP: [a x 6, b], a's class
        // decided within the run of a's), or a sweep's next size after a
        // loop of one. Told apart by which payload comes back first (next()).
        t.seenBeforeClass = true;
      } else {
        // Nothing followed them since the decisions: what was left there
        // ends nothing of this class's.
        t.seen.clear();
        t.step.clear();
        t.stepOpen = false;
      }
    }
    ++t.classesRacing;
    if (t.checkEpochs > 0 || !t.armEpochs.empty()) {
      // A step check under way no longer times the whole mix: it starts
      // again once the classes of an epoch are decided.
      t.checkEpochs = 0;
      t.armEpochs.clear();
      t.epoch = {};
      t.considered = -1;
    }
  }
}

bool OnlineSelection::endsEpoch(const CollectiveTrials& t, std::size_t bytes) {
  // The calls of a training step repeat in order: the epoch's first payload
  // again is the next step. Before that, another payload again, not right
  // after itself (a transformer's equal buckets come in a row), is a step
  // whose order changed: DDP rebuilds its buckets after the first one.
  // Every rank sees the same calls, so every rank ends the epoch at the same
  // call. Not told apart: a step that starts with a run of equal payloads
  // (each of them ends an epoch, as in a loop of one size), and a run of one
  // payload after others that never come back (one epoch of kEpochCalls).
  if (bytes == t.seen.front() || t.seen.size() >= static_cast<std::size_t>(kEpochCalls)) return true;
  return bytes != t.seen.back() && std::find(t.seen.begin(), t.seen.end(), bytes) != t.seen.end();
}

bool OnlineSelection::endEpoch(Collective coll) {
  CollectiveTrials& t = trials_[static_cast<std::size_t>(coll)];
  // The step: this epoch, after those of one call before it (see the step
  // check in the header).
  if (!t.stepOpen) t.step.clear();
  t.step.insert(t.step.end(), t.seen.begin(), t.seen.end());
  t.seenBeforeClass = false;  // an epoch ended first: the calls before the new class were of its step
  t.stepOpen = t.seen.size() < 2 && t.step.size() < static_cast<std::size_t>(kEpochCalls);
  t.seen.clear();
  if (t.stepOpen) {
    // The check's epoch and its arm go on into the next epoch.
  } else if (t.checkEpochs > 0) {
    t.armEpochs[armOf(t)].push_back(std::move(t.epoch));
    t.epoch = {};
    // After each arm's last epoch, and after its second: there the check
    // ends early where the arms' spans lie apart (stepCheck).
    if (--t.checkEpochs == 0 || interimDue(t)) t.checkpointDue = true;
  } else if (t.racingCalls == 0) {
    // An epoch whose classes are all decided, though a class seen once
    // (DDP's first step, before its buckets are rebuilt) may still be in
    // the race.
    startStepCheck(coll);
  }
  t.racingCalls = 0;
  for (ClassState& s : classes_[static_cast<std::size_t>(coll)]) {
    if (!s.triedThisEpoch) continue;
    s.triedThisEpoch = false;
    ++s.at;
    if (roundOver(s)) t.checkpointDue = true;
  }
  return t.checkpointDue;
}

bool OnlineSelection::next(const algorithms::CollectiveSpec& spec, const tuning::ModelSelection& model,
                           WireFormat wire, const algorithms::AlgorithmInfo*& algo, Trial& trial) {
  algo = nullptr;
  trial.index = -1;
  trial.stepTimed = false;
  const std::size_t bytes = spec.payloadBytes();
  if (!enabled_ || bytes < kMinBytes || spec.collective == Collective::kBarrier) return false;
  const int cls = classOf(bytes);
  ClassState& s = state(spec.collective, cls);
  if (!s.started) startClass(s, spec, model, wire);
  CollectiveTrials& t = trials_[static_cast<std::size_t>(spec.collective)];
  if (t.classesRacing == 0 && t.checkEpochs == 0 && !t.checkpointDue && !t.checkWanted) return false;
  if (t.checkpointDue) return true;  // a checkpoint that did not complete (its agreement threw)
  if (t.seenBeforeClass && !t.seen.empty() && bytes == t.seen.back() && bytes != t.seen.front()) {
    // The new class's payload came back before the calls before it did: a
    // sweep's next size. Its epochs and steps start at its first call.
    t.seen.erase(t.seen.begin(), std::find(t.seen.begin(), t.seen.end(), bytes));
    t.step.clear();
    t.stepOpen = false;
    t.seenBeforeClass = false;
  }
  if (!t.seen.empty() && endsEpoch(t, bytes) && endEpoch(spec.collective)) return true;
  t.seen.push_back(bytes);
  if (t.checkEpochs > 0) {  // the step check: the mix, or one winner for every call, timed together
    // An arm serves the checked classes (those it may replace).
    const std::string_view arm = t.arms[armOf(t)];
    const algorithms::AlgorithmInfo* a = candidateNamed(s, arm);
    const bool checked = std::find(t.checkClasses.begin(), t.checkClasses.end(), cls) != t.checkClasses.end();
    if (!arm.empty() && checked && s.winner != nullptr && a != nullptr && a->unsupportedReason(spec).empty()) {
      algo = a;
    }
    ++t.epoch.calls;
    trial.collective = spec.collective;
    trial.stepTimed = true;
    return false;
  }
  if (s.decided) return false;
  s.triedThisEpoch = true;
  ++t.racingCalls;
  const std::size_t c = s.racing[s.at];
  const algorithms::AlgorithmInfo* candidate = s.candidates[c];
  // This payload may be beyond a candidate (native's int counts, rd's
  // power-of-two block layouts): the same answer on every rank; no time.
  if (!candidate->unsupportedReason(spec).empty()) return false;
  algo = candidate;
  trial = {spec.collective, cls, static_cast<int>(c), bytes};
  return false;
}

OnlineSelection::Sample* OnlineSelection::addSample(const Trial& trial) {
  if (trial.index < 0) return nullptr;
  ClassState& s = state(trial.collective, trial.sizeClass);
  if (static_cast<std::size_t>(trial.index) >= s.samples.size()) return nullptr;
  Sample& out = s.samples[static_cast<std::size_t>(trial.index)].emplace_back();
  out.scale = static_cast<double>(s.firstBytes) / static_cast<double>(trial.bytes);
  return &out;
}

void OnlineSelection::recordTime(const Trial& trial, core::Clock::time_point start, core::Clock::time_point end) {
  if (trial.stepTimed) {
    EpochSpan& e = trials_[static_cast<std::size_t>(trial.collective)].epoch;
    ++e.timed;
    e.firstLaunch = std::min(e.firstLaunch, start);
    e.lastEnd = std::max(e.lastEnd, end);
  }
  if (Sample* s = addSample(trial)) s->us = core::usBetween(start, end) * s->scale;
}

void OnlineSelection::recordLaunch(const Trial& trial, std::shared_ptr<const executor::OpState> state,
                                   core::Clock::time_point launched) {
  if (trial.stepTimed) {
    EpochSpan& e = trials_[static_cast<std::size_t>(trial.collective)].epoch;
    ++e.timed;
    e.firstLaunch = std::min(e.firstLaunch, launched);
    e.states.push_back(state);
  }
  if (Sample* s = addSample(trial)) s->state = std::move(state);
}

double OnlineSelection::spanOf(const EpochSpan& e) {
  if (e.calls == 0 || e.timed != e.calls) return kNoTime;
  core::Clock::time_point end = e.lastEnd;
  for (const auto& state : e.states) {
    if (!state->isDone() || state->error() || state->completedAt == core::Clock::time_point{}) return kNoTime;
    end = std::max(end, state->completedAt);
  }
  return core::usBetween(e.firstLaunch, end);
}

std::vector<double> OnlineSelection::agreeOnTimes(ClassState& s, transport::Transport& world) {
  // Each candidate's median local time over its calls so far (infinity:
  // none; of two, the slower), then the slowest rank's: a collective is as
  // fast as its slowest member. Candidates out of the race keep infinity.
  // [0, n): each candidate's median; [n, 2n): its fastest call, which is
  // what a drop goes by (a first call pays the schedule's build and, across
  // nodes, MPI's connection set-up: one slow sample must not drop it).
  const std::size_t n = s.candidates.size();
  std::vector<double> agreed(2 * n, kNoTime);
  std::vector<double> times;
  for (std::size_t c : s.racing) {
    times.clear();
    for (Sample& sample : s.samples[c]) {
      if (sample.state && sample.state->isDone() && !sample.state->error() && sample.state->sharedUs >= 0) {
        sample.us = sample.state->sharedUs * sample.scale;
      }
      sample.state.reset();
      if (sample.us >= 0) times.push_back(sample.us);
    }
    std::sort(times.begin(), times.end());
    if (!times.empty()) {
      agreed[c] = times[times.size() / 2];
      agreed[n + c] = times.front();
    }
  }
  world.nativeAllreduce(agreed.data(), agreed.data(), 2 * n, DataType::kFloat64, ReduceOp::kMax, nullptr);
  for (std::size_t c : s.racing) s.agreedUs[c] = agreed[c];
  return agreed;
}

std::string OnlineSelection::dropSlow(ClassState& s, const double* medianUs, const double* fastestUs) {
  // Out of the race: no time, or even its fastest call slower than
  // kDropFactor x the best median. Raw times, not weighed: a native dropped
  // here (over kDropFactor = 1.5x) could not win under either margin.
  double best = kNoTime;
  for (std::size_t c : s.racing) best = std::min(best, medianUs[c]);
  std::vector<std::size_t> left;
  std::ostringstream dropped;
  for (std::size_t c : s.racing) {
    if (fastestUs[c] < kNoTime && fastestUs[c] <= best * kDropFactor) {
      left.push_back(c);
    } else {
      dropped << (dropped.tellp() > 0 ? ", " : "") << s.candidates[c]->name;
      s.dropped[c] = true;
    }
  }
  s.racing = std::move(left);
  return dropped.str();
}

std::vector<std::size_t> OnlineSelection::nearTies(const std::vector<double>& medianUs,
                                                   const std::vector<std::size_t>& racing) {
  // The fastest and the runner-up (the first of equals in racing's order).
  std::size_t best = medianUs.size();
  std::size_t second = medianUs.size();
  for (std::size_t c : racing) {
    if (medianUs[c] >= kNoTime) continue;
    if (best == medianUs.size() || medianUs[c] < medianUs[best]) {
      second = best;
      best = c;
    } else if (second == medianUs.size() || medianUs[c] < medianUs[second]) {
      second = c;
    }
  }
  if (second == medianUs.size() || medianUs[second] > medianUs[best] * (1.0 + kTieMargin)) return {};
  std::vector<std::size_t> tied;
  for (std::size_t c : racing) {
    if (c == best || c == second) tied.push_back(c);
  }
  return tied;
}

std::vector<std::size_t> OnlineSelection::challenge(const std::vector<std::string_view>& names,
                                                    const std::vector<double>& medianUs,
                                                    const std::vector<std::size_t>& racing, double nativeMargin) {
  std::vector<double> us(medianUs.size(), kNoTime);
  for (std::size_t c : racing) us[c] = medianUs[c];
  const std::size_t m = modelChoice(names);
  if (m == names.size()) return {};
  const std::size_t winner = winnerAmong(names, us, nativeMargin);
  if (winner == names.size() || winner == m || names[winner] == kNative || us[m] >= kNoTime) return {};
  std::vector<std::size_t> two;
  for (std::size_t c : racing) {
    if (c == m || c == winner) two.push_back(c);
  }
  return two;
}

const algorithms::AlgorithmInfo* OnlineSelection::candidateNamed(const ClassState& s, std::string_view name) {
  const auto it = std::find_if(s.candidates.begin(), s.candidates.end(),
                               [&](const algorithms::AlgorithmInfo* a) { return a->name == name; });
  return it != s.candidates.end() ? *it : nullptr;
}

std::vector<std::string_view> OnlineSelection::namesOf(const ClassState& s) {
  std::vector<std::string_view> names(s.candidates.size());
  for (std::size_t i = 0; i < names.size(); ++i) names[i] = s.candidates[i]->name;
  return names;
}

std::vector<double> OnlineSelection::tieTimes(const std::vector<std::string_view>& names,
                                              const std::vector<double>& medianUs,
                                              const std::vector<std::size_t>& racing, double nativeMargin) {
  std::vector<double> out = weighed(names, medianUs, nativeMargin);
  const std::size_t m = modelChoice(names);
  if (m == names.size()) return out;
  if (std::find(racing.begin(), racing.end(), m) == racing.end() || medianUs[m] >= kNoTime) return out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (names[i] != kNative && i != m && !displacesModel(medianUs[i], medianUs[m])) {
      out[i] = kNoTime;
    }
  }
  return out;
}

std::vector<double> OnlineSelection::weighed(const std::vector<std::string_view>& names,
                                             const std::vector<double>& medianUs, double nativeMargin) {
  // Native's time counts as t / (1 - margin): it wins where it is faster
  // than the best schedule by more than the margin (margin > 0), or where it
  // is slower by less than -margin (margin < 0: t < best x (1 - margin)).
  // A close call goes to the one that stays where it was measured. Over MPI
  // between nodes the backend's times swing from call to call (1.7x at 4 and
  // 64 MiB over TCP: a per-call temporary, its own protocol switches) while
  // a schedule's point-to-point messages repeat: margin +10%. Gloo's native
  // repeats (Transport::repeatsNativeTimes) and the schedules' trials over
  // its pairs swing (at 2 x 1 under torchrun rhd took 141-310 ms in one
  // size class, native 173-194 in 22 runs of 24): margin -10%. Near ties
  // (nearTies) are weighed the same way, so a tie round is run by the two
  // candidates closest to winning.
  BC_INTERNAL(medianUs.size() == names.size() && nativeMargin > -1.0 && nativeMargin < 1.0,
              "online selection: " << medianUs.size() << " times for " << names.size()
                                   << " candidates, native margin " << nativeMargin);
  std::vector<double> out = medianUs;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (names[i] == kNative && out[i] < kNoTime) out[i] /= 1.0 - nativeMargin;
  }
  return out;
}

std::size_t OnlineSelection::winnerOf(const ClassState& s) const {
  std::vector<double> medianUs(s.candidates.size(), kNoTime);
  for (std::size_t c : s.racing) medianUs[c] = s.agreedUs[c];
  return winnerAmong(namesOf(s), medianUs, nativeMargin_);
}

const algorithms::AlgorithmInfo* OnlineSelection::rivalOf(const ClassState& s, std::size_t winner) {
  // Native and the best schedule (the winner, or the one that would have
  // won without native), where their medians lie within kTieMargin of each
  // other: whichever of the two did not win. Candidates a challenge or a
  // near tie left out of the last rounds count with their last medians;
  // those dropped as too slow do not.
  const std::vector<std::string_view> names = namesOf(s);
  const std::size_t n = names.size();
  std::vector<double> us = s.agreedUs;
  for (std::size_t c = 0; c < n; ++c) {
    if (s.dropped[c]) us[c] = kNoTime;
  }
  const std::size_t native = static_cast<std::size_t>(std::find(names.begin(), names.end(), kNative) - names.begin());
  if (native == n || us[native] >= kNoTime) return nullptr;
  std::size_t schedule = winner;
  if (winner == native) {
    std::vector<double> schedulesUs = us;
    schedulesUs[native] = kNoTime;
    schedule = winnerAmong(names, schedulesUs, 0.0);
    if (schedule == n) return nullptr;
  }
  const double a = us[native];
  const double b = us[schedule];
  if (std::max(a, b) > std::min(a, b) * (1.0 + kTieMargin)) return nullptr;
  return s.candidates[winner == native ? schedule : native];
}

std::size_t OnlineSelection::winnerAmong(const std::vector<std::string_view>& names, const std::vector<double>& medianUs,
                                         double nativeMargin) {
  // The fastest by weighed time (native when it was a candidate: see
  // ModelSelection::trialCandidates); between equals a schedule. Among the
  // schedules, the model's choice (the first) unless beaten by more than
  // kModelKeepPercent.
  const std::vector<double> us = weighed(names, medianUs, nativeMargin);
  const std::size_t n = names.size();
  std::size_t best = n;
  for (std::size_t i = 0; i < n; ++i) {
    if (names[i] != kNative && us[i] < kNoTime && (best == n || us[i] < us[best])) best = i;
  }
  const std::size_t model = modelChoice(names);
  if (best != model && best != n && us[model] < kNoTime && !displacesModel(us[best], us[model])) best = model;
  for (std::size_t i = 0; i < n; ++i) {
    if (names[i] == kNative && us[i] < kNoTime && (best == n || us[i] < us[best])) best = i;
  }
  return best;
}

void OnlineSelection::decide(Collective coll, transport::Transport& world) {
  // Every class whose round is over (an agreement that threw leaves its
  // class so, and the flag set: the next call retries).
  for (int cls = 0; cls < kClasses; ++cls) {
    if (roundOver(state(coll, cls))) decideClass(coll, cls, world);
  }
  CollectiveTrials& t = trials_[static_cast<std::size_t>(coll)];
  // Its epochs ran, or two of each arm's (throws: retried).
  if (!t.armEpochs.empty() && (t.checkEpochs == 0 || interimDue(t))) stepCheck(coll, world);
  t.checkpointDue = false;
  if (t.checkEpochs == 0 && t.armEpochs.empty() && t.classesRacing == 0) startStepCheck(coll);
}

void OnlineSelection::startStepCheck(Collective coll) {
  CollectiveTrials& t = trials_[static_cast<std::size_t>(coll)];
  // Once per new decision: a class seen once stays in the race and every
  // epoch after the others' decisions comes here.
  const int decided = static_cast<int>(std::count_if(classes_[static_cast<std::size_t>(coll)].begin(),
                                                     classes_[static_cast<std::size_t>(coll)].end(),
                                                     [](const ClassState& s) { return s.winner != nullptr; }));
  t.checkWanted = false;
  if (decided == t.considered) return;
  // Only a whole step of several payloads is checked: where the epoch just
  // ended leaves a step open (one that begins with a run of equal
  // payloads), the check waits for its end; a loop of one payload is never
  // checked (its span is that call's time, which its trials measured: its
  // steps are kEpochCalls calls of one payload).
  if (t.stepOpen) {
    t.checkWanted = true;
    return;
  }
  if (std::none_of(t.step.begin(), t.step.end(), [&](std::size_t b) { return b != t.step.front(); })) return;
  t.considered = decided;
  // The winners of the classes that ran side by side in the step just
  // ended (a sweep's sizes, one after another, are not a mix).
  t.checkClasses.clear();
  for (std::size_t bytes : t.step) {
    const int cls = classOf(bytes);
    if (bytes >= kMinBytes && std::find(t.checkClasses.begin(), t.checkClasses.end(), cls) == t.checkClasses.end()) {
      t.checkClasses.push_back(cls);
    }
  }
  std::sort(t.checkClasses.begin(), t.checkClasses.end());
  std::vector<std::string_view> named;  // the winners and rivals, in class order
  std::ostringstream os;
  const auto add = [&](std::string_view name) {
    if (std::find(named.begin(), named.end(), name) == named.end()) named.push_back(name);
  };
  for (int cls : t.checkClasses) {
    const ClassState& s = state(coll, cls);
    if (s.winner == nullptr) continue;
    os << (os.tellp() > 0 ? ", " : "") << rangeOf(cls) << " " << s.winner->name;
    add(s.winner->name);
    if (s.rival != nullptr) {
      os << " (rival " << s.rival->name << ")";
      add(s.rival->name);
    }
  }
  // An arm is timed where it would run some checked class other than the
  // mix does.
  t.arms.assign(1, std::string_view{});
  for (std::string_view name : named) {
    const bool differs = std::any_of(t.checkClasses.begin(), t.checkClasses.end(), [&](int cls) {
      const ClassState& s = state(coll, cls);
      return s.winner != nullptr && s.winner->name != name && candidateNamed(s, name) != nullptr;
    });
    if (differs) t.arms.push_back(name);
  }
  if (t.arms.size() < 2) return;
  t.armEpochs.assign(t.arms.size(), {});
  t.epoch = {};
  t.checkEpochs = static_cast<int>(t.arms.size()) * kCheckEpochs;
  t.interimChecked = false;
  t.checkedWinners = os.str();
}

void OnlineSelection::stepCheck(Collective coll, transport::Transport& world) {
  CollectiveTrials& t = trials_[static_cast<std::size_t>(coll)];
  // Every epoch's span, the slowest rank's (every rank closed the same
  // epochs: the same calls end them), then each arm's median.
  std::vector<double> spans;
  for (const std::vector<EpochSpan>& epochs : t.armEpochs) {
    for (const EpochSpan& e : epochs) spans.push_back(spanOf(e));
  }
  world.nativeAllreduce(spans.data(), spans.data(), spans.size(), DataType::kFloat64, ReduceOp::kMax, nullptr);
  std::vector<double> armUs;
  std::vector<std::vector<double>> armSpans;
  std::size_t at = 0;
  std::size_t best = 0;
  for (const std::vector<EpochSpan>& epochs : t.armEpochs) {
    const auto from = spans.begin() + static_cast<std::ptrdiff_t>(at);
    armSpans.emplace_back(from, from + static_cast<std::ptrdiff_t>(epochs.size()));
    armUs.push_back(medianOf(armSpans.back()));
    at += epochs.size();
    if (armUs.size() > 1 && armUs.back() < armUs[best]) best = armUs.size() - 1;
  }
  const std::size_t epochsEach = t.armEpochs.front().size();
  if (t.checkEpochs > 0) {
    // Two epochs of each arm: done where every epoch was timed and the
    // fastest arm's slowest span beats every other arm's fastest by the
    // margin (the order cannot change with one more epoch each); otherwise
    // the last round runs. (The medians so taken are the faster of two.)
    t.interimChecked = true;
    if (!std::all_of(spans.begin(), spans.end(), [](double us) { return us < kNoTime; })) return;
    const double worstOfBest = *std::max_element(armSpans[best].begin(), armSpans[best].end());
    for (std::size_t a = 0; a < armSpans.size(); ++a) {
      if (a == best) continue;
      const double fastest = *std::min_element(armSpans[a].begin(), armSpans[a].end());
      if (!(worstOfBest < fastest * (1.0 - kStepKeepPercent / 100.0))) return;
    }
    t.checkEpochs = 0;
  }
  t.armEpochs.clear();
  const bool replace = best > 0 && armUs[0] < kNoTime && armUs[best] < armUs[0] * (1.0 - kStepKeepPercent / 100.0);
  const std::string_view chosen = t.arms[best];
  std::ostringstream changed;
  for (int cls : t.checkClasses) {
    if (!replace) break;
    ClassState& s = state(coll, cls);
    if (s.winner == nullptr || s.winner->name == chosen) continue;
    const algorithms::AlgorithmInfo* a = candidateNamed(s, chosen);
    if (a == nullptr) continue;
    changed << (changed.tellp() > 0 ? ", " : "") << rangeOf(cls) << " (was " << s.winner->name << ")";
    s.rival = nullptr;  // decided in the step: a later check does not time the two again
    for (Winner& w : winners_) {
      if (w.collective == coll && w.algorithm == s.winner && w.minBytes == (std::size_t{1} << cls)) {
        w.algorithm = a;
      }
    }
    s.winner = a;
  }
  if (log_ && world.rank() == 0) {
    std::ostringstream os;
    // Of two spans medianOf takes the faster (a check that ended early): say so.
    os << "[boostcomm] step check of " << toString(coll) << " (" << t.checkedWinners << "), "
       << (epochsEach == 2 ? "faster span of " : "median span of ") << epochsEach
       << " epochs each (slowest rank): each class's winner " << msText(armUs[0]);
    for (std::size_t a = 1; a < t.arms.size(); ++a) os << ", " << t.arms[a] << " for every call " << msText(armUs[a]);
    if (changed.tellp() > 0) {
      os << "; " << chosen << " now serves " << changed.str();
    } else {
      os << "; keeping each class's winner";
    }
    std::fprintf(stderr, "%s\n", os.str().c_str());
  }
}

void OnlineSelection::decideClass(Collective coll, int cls, transport::Transport& world) {
  ClassState& s = state(coll, cls);
  BC_INTERNAL(roundOver(s), "online selection: checkpoint before a round of its class ended");
  const std::size_t n = s.candidates.size();
  const std::vector<double> agreed = agreeOnTimes(s, world);
  const std::size_t lo = std::size_t{1} << cls;
  const std::size_t hi = cls >= 63 ? static_cast<std::size_t>(-1) : (std::size_t{1} << (cls + 1)) - 1;
  const std::string range = rangeOf(cls);
  if (s.round + 1 < s.rounds) {
    const std::string dropped = dropSlow(s, agreed.data(), agreed.data() + n);
    if (log_ && world.rank() == 0 && !dropped.empty()) {
      std::fprintf(stderr, "[boostcomm] trials of %s %s, round %d: dropping %s (slower than %.1fx the best)\n",
                   std::string(toString(coll)).c_str(), range.c_str(), s.round + 1, dropped.c_str(),
                   kDropFactor);
    }
    if (s.racing.size() > 1) {  // the next round
      ++s.round;
      s.at = 0;
      return;
    }
  } else if (s.round + 1 < kRounds) {
    // A schedule ahead of the model's choice first: a near tie might leave the model's choice out.
    std::vector<std::size_t> tied = challenge(namesOf(s), s.agreedUs, s.racing, nativeMargin_);
    const bool nearTie = tied.empty();
    if (nearTie) tied = nearTies(tieTimes(namesOf(s), s.agreedUs, s.racing, nativeMargin_), s.racing);
    if (nearTie && tied.size() > 1) {
      // Native and a schedule, the winner and its rival: the step check
      // times the two in whole epochs, which per-call rounds cannot replace.
      const std::size_t best = winnerOf(s);
      const algorithms::AlgorithmInfo* rival = best != n ? rivalOf(s, best) : nullptr;
      const auto isPair = [&](std::size_t c) { return c == best || s.candidates[c] == rival; };
      if (rival != nullptr && std::all_of(tied.begin(), tied.end(), isPair)) tied.clear();
    }
    if (tied.size() > 1) {  // one more round for the two
      if (log_ && world.rank() == 0) {
        std::ostringstream os;
        for (std::size_t c : tied) os << (os.tellp() > 0 ? ", " : "") << s.candidates[c]->name;
        std::ostringstream why;
        if (nearTie) {
          why << "within " << static_cast<int>(kTieMargin * 100.0) << "% of each other";
        } else {
          why << "(the model's choice behind another schedule)";
        }
        std::fprintf(stderr, "[boostcomm] trials of %s %s, round %d: %s %s, one more round\n",
                     std::string(toString(coll)).c_str(), range.c_str(), s.round + 1, os.str().c_str(),
                     why.str().c_str());
      }
      s.racing = std::move(tied);
      ++s.round;
      ++s.rounds;
      s.at = 0;
      return;
    }
  }
  s.decided = true;
  --trials_[static_cast<std::size_t>(coll)].classesRacing;
  const std::size_t best = winnerOf(s);
  if (best != n) {
    s.winner = s.candidates[best];
    winners_.push_back({coll, lo, hi, s.winner});
    s.rival = rivalOf(s, best);
  }
  if (log_ && world.rank() == 0) {
    std::ostringstream os;
    os << "[boostcomm] selection: " << toString(coll) << " " << range << ": tried";
    for (std::size_t i = 0; i < n; ++i) {
      os << " " << s.candidates[i]->name << " ";
      if (s.agreedUs[i] < kNoTime) {
        os << std::fixed << std::setprecision(1) << s.agreedUs[i] << " us";
      } else {
        os << "(no time)";
      }
    }
    os << " (slowest rank";
    const std::vector<std::string_view> names = namesOf(s);
    if (std::find(names.begin(), names.end(), kNative) != names.end()) os << "; native weighed as t / " << std::setprecision(2) << 1.0 - nativeMargin_;
    os << "); keeping " << (best != n ? s.candidates[best]->name : "the model's choice");
    if (s.rival != nullptr) {
      os << " (rival " << s.rival->name << ", within " << static_cast<int>(kTieMargin * 100.0)
         << "%: the step check times it)";
    }
    std::fprintf(stderr, "%s\n", os.str().c_str());
  }
}

}  // namespace boostcomm::tuning
