// Online selection: where the cost model picks a communicator's algorithms
// (several nodes, no tuning cache: the "model" selection layer), the first
// calls of each (collective, size class) time the model's leading
// candidates in place, agree on the winner across ranks and keep it for
// the life of the communicator. A wrong model then costs a few calls,
// never a whole job.
//
// Terms. Size class c: payloads of [2^c, 2^(c+1)) bytes. Trial: a call of
// a class run with the candidate its class is trying in this epoch. Epoch:
// the calls of one collective from one call to the next call of the same
// payload (see endsEpoch; at most kEpochCalls calls): one step of a
// training loop, whose DDP buckets repeat in the same order (a step that
// begins with a run of equal payloads: several epochs, see the step check
// below). Every class under trial runs one
// candidate for a whole epoch, and all classes of the collective change
// candidates together at its end, so a step runs one algorithm beside
// itself: when candidates took turns call by call, DDP's two 8-16 MiB
// buckets of a step drew different candidates, and hier's 25 MiB trial ran
// beside ring's 9 MiB one, took 2.4x its time beside itself, and lost.
// The trials go in rounds (R = kRounds of them; one where the
// model predicts a call of kOneRoundUs or more): each round gives every
// candidate still in the race one epoch, in candidate order; every rank
// sees the same calls, so every rank runs the same candidate for the same
// call. Checkpoint: at the epoch's end where a class's round is over, the
// communicator drains its work in flight and allreduces (MAX) each
// candidate's median local time so far. After a round that is not the
// last, a candidate slower than kDropFactor x the best is out of the race:
// a trial that cannot win back its cost is not repeated (native's 3 calls
// of a 25 MiB DDP bucket between two nodes cost 1.3 s where the winner took
// 0.15 s each). After the last round (or when one candidate is left) the
// decision: the fastest slowest-rank time wins (among the schedules, the
// model's choice unless beaten by more than kModelKeepPercent), native only
// when it is faster than that schedule by more than kNativeWinPercent where its
// times between nodes swing from call to call (Open MPI's); where they do
// not (Gloo's: Transport::repeatsNativeTimes) native unless it is slower
// than that schedule by more than kNativeKeepPercent. Every rank sees the same maxima,
// so every rank keeps the same winner. Before that, a class of fewer rounds
// whose winner would be a schedule other than the model's choice runs one
// more round of the two (challenge), and one whose runner-up is within
// kTieMargin of the best (a near tie) one more round of those two; the
// others leave the race; up to kRounds rounds in all. A near tie of native
// and a schedule that are each other's winner and rival (see the step
// check) gets no more rounds: the step check times the two.
//
// Step check. The classes of a collective are decided one at a time, each by
// its own calls' times, but in a step they share the link: at 2 x 2 native
// won the 8-16 MiB class (Gloo's ring over four ranks, as fast alone as
// hier) while moving 1.5x hier's bytes between the nodes, which delayed the
// 25 MiB bucket beside it; the mix ran DDP at 1.10-1.15x gloo's where hier
// for every bucket ran at 1.23-1.28x. The same holds within one class: on
// the BERT-like encoder at 2 x 2 (one 16-32 MiB class) hier's trials were
// 10% ahead of native's (in another run 8% behind), native was kept, and
// the steps ran at 0.96-1.00x gloo's where hier forced ran them at 1.23x.
// At 2 x 1 rd's trials came out 19% ahead of native's, rd won, and ran the
// steps at 0.94x gloo's. So where the winners of classes that run side by
// side (in one epoch) differ, or a class's native and best schedule lie
// within kTieMargin of each other (the one that lost is the winner's
// rival), whole epochs are timed: an
// epoch's span, from its first call's launch to its last call's completion
// (in DDP: the backward its calls share the cores with, then the exposed
// communication). The mix is timed beside each of those winners serving
// every call of the epoch (where it is the class's candidate), and beside
// each rival serving every call: the arms take turns, one epoch each,
// kCheckEpochs times (two where, after two epochs each, every span of the
// fastest arm beats every span of each other arm by kStepKeepPercent); an
// arm that would run every call as the mix does is not timed. Where an
// arm's median span is
// shorter than the mix's by more than kStepKeepPercent, that arm's
// algorithm (the fastest such) serves each of those classes that has it as
// a candidate. Spans are agreed (MAX) across ranks, so every rank keeps the
// same. Not the exposed tail alone (last launch to last completion): by it
// the arms came out within 5% of each other where forced hier ran the step
// 10% faster than the mix. Not the period from one epoch's first call to
// the next one's: it holds whatever the caller does between steps (the
// DDP benchmark's gloo blocks made some epochs 3x longer). The trial
// epochs' times are not reused: they also pay a schedule's first build and
// DDP's first step. Asynchronous calls have a span only while a progress
// thread runs (as their trials have a time); without one nothing is
// replaced. A class that starts during a check cancels it; it starts again
// after the next step once the classes are decided. The check's unit is a step: a
// step that begins with a run of equal payloads ends an epoch at each of
// them ([a], [a], [a, b]), so an epoch of one call is counted with the
// epochs after it until one of several calls closes the step ([a, a, a,
// b]; after kEpochCalls epochs of one call, those close it). Otherwise a
// check of two arms gave one of them every [a] and the other every [a, b],
// and a decision made at the end of an [a] found no step to check, and
// none came after it. A class that starts while the check waits for its
// step (DDP's [a x 6, b], a's class decided within the first run of a's)
// keeps the calls before it in its epoch unless its own payload comes back
// first (a sweep's next size, after a loop of one). (A step that also ends
// with its first payload, [a, b, a], is cut across two: [a, a, b], the last
// call of one and the first two of the next, a span that holds what the
// caller did between them. A step whose payloads are all equal cannot be
// told from a loop of one payload: it is never checked.)
//
// Timing: a blocking call from its start to its return; an asynchronous
// call by its share of the time from launch to the engine seeing it
// complete (ProgressEngine::enableShareClock: with k calls in flight, each
// gets dt / k; a native call queued behind another where the backend runs
// them in turn gets nothing until its turn), only while a progress thread runs (without one, completion
// is seen only inside the caller's wait, which would time the caller's
// compute). A call's time is scaled to the class's first payload (a class
// spans sizes up to 2x). A candidate without a time on some rank cannot
// win; with no time at all the model's choice stays.
//
// Determinism: candidates sum in different orders, so results are bitwise
// identical across ranks but may differ in the last bits between calls of a
// class until it is decided, and between runs whose decisions differ.
// BOOSTCOMM_SELECTION_TRIALS=0 pins the model's choice (run-to-run
// reproducible); BOOSTCOMM_LOG_SELECTION=1 prints each decision, drop, challenge and near
// tie on rank 0.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "algorithms/registry.h"
#include "core/clock.h"
#include "executor/progress_engine.h"
#include "transport/transport.h"
#include "tuning/model_selection.h"

namespace boostcomm::tuning {

class OnlineSelection {
 public:
  // Rounds of a class: each gives every candidate an epoch, and the median
  // of three counts: a blocking trial's first call pays its schedule's build
  // and scratch, and over TCP native's times are bimodal (32 vs 52-60 ms at
  // 4 MiB on the emulated 1 Gbit/s link), so the fastest of two chose it
  // where it then ran 1.5x slower than rhd.
  static constexpr int kRounds = 3;
  // A class whose fastest predicted call takes this long runs one round:
  // its calls are bound by the link and repeat (rd, 25 MiB between two
  // emulated nodes: 221-227 ms), and a DDP bucket of that size comes once
  // per step, so three rounds kept its trials going for a dozen steps.
  static constexpr double kOneRoundUs = 20000.0;
  // After a round, a candidate slower than this times the best leaves the race.
  static constexpr double kDropFactor = 1.5;
  // A near tie after the last round of a class of fewer than kRounds rounds
  // -- the runner-up's median within this fraction of the best's -- earns
  // those two one more round, until the class has had kRounds. A one-round
  // class decides on one sample per candidate, and across emulated nodes one
  // sample of a 25 MiB DDP bucket put ring ahead of hier (e.g. 221 against
  // 265 ms) where, timed in a loop, hier took 276-340 ms and ring 448-491:
  // the step then ran at 1.03-1.07x gloo's instead of 1.22x. Each tie round
  // costs two epochs, one per tied candidate: at most four per class.
  static constexpr double kTieMargin = 0.25;
  static constexpr double kNativeWinPercent = 10.0;
  // Where native's times repeat (Gloo's ring over its pairs), how much
  // slower than the schedule chosen (see kModelKeepPercent) it may be and still be kept. A schedule's
  // trials there swing more than that margin's first value of 10% covered:
  // at 2 x 1 in float32 ring's trial came out 10.2% ahead of native's
  // (180 against 200 ms) and ring then ran DDP steps at 0.92-0.95x gloo's
  // where native ran them at 0.99x. Wins of 26% (ring on the BERT-like
  // encoder at 2 x 1) and 41% (hier at 2 x 2) stay wins.
  static constexpr double kNativeKeepPercent = 20.0;
  // Among the schedules, the model's choice (the first schedule among a
  // class's candidates: ModelSelection::trialCandidates ranks them by
  // predicted time) is kept unless another is faster by more than this. A
  // schedule's trials over Gloo's pairs swing from call to call: at 2 x 1
  // under torchrun with the bf16 wire rhd's trial of the 25 MiB bucket came
  // out 0.8% ahead of ring's (88.2 against 88.9 ms), and rhd then ran the
  // step at 1.34x gloo's where ring, the model's choice, runs it at 1.62x
  // (forced: ring 1.62, 1.62x; rhd 1.37, 1.39x).
  static constexpr double kModelKeepPercent = 10.0;
  // The step check: the epochs each arm (the mix of the classes' winners,
  // one winner or rival for every call) is timed for, and by how much an
  // arm's median span must beat the mix's to replace it.
  static constexpr int kCheckEpochs = 3;
  static constexpr double kStepKeepPercent = 2.0;
  // An epoch also ends after this many calls (a loop whose payloads never
  // repeat still moves on).
  static constexpr int kEpochCalls = 64;
  static constexpr std::size_t kMinBytes = 4096;  // below: latency-bound, the model's choice stands
  static constexpr int kClasses = 64;

  // Where a trial call's time goes (index < 0: not a trial).
  struct Trial {
    Collective collective = Collective::kAllreduce;
    int sizeClass = 0;
    int index = -1;
    std::size_t bytes = 0;  // the call's payload
    bool stepTimed = false;  // its launch and completion count in its epoch's span (the step check)
    // Whether the caller times this call (recordTime, recordLaunch).
    bool timed() const { return index >= 0 || stepTimed; }
  };
  struct Winner {
    Collective collective;
    std::size_t minBytes;
    std::size_t maxBytes;
    const algorithms::AlgorithmInfo* algorithm;
  };

  OnlineSelection(bool enabled, bool log, double nativeMarginPercent = kNativeWinPercent);

  // The winner among candidates (by name, in the model's order) with these
  // slowest-rank median times (infinity: out of the race): the fastest
  // schedule, or the model's choice where that one is not faster than it by
  // more than kModelKeepPercent; or native where it is faster than the
  // schedule so chosen by more than nativeMargin (a fraction: 0.1 is 10%;
  // negative: native wins unless slower by more than -nativeMargin).
  // names.size() where none has a time.
  static std::size_t winnerAmong(const std::vector<std::string_view>& names, const std::vector<double>& medianUs,
                                 double nativeMargin);
  // The times as the decision weighs them: native's t / (1 - nativeMargin),
  // the others' as they are.
  static std::vector<double> weighed(const std::vector<std::string_view>& names, const std::vector<double>& medianUs,
                                     double nativeMargin);

  bool enabled() const { return enabled_; }
  bool logging() const { return log_; }
  // The decided winners, for the selection map's model layer.
  const std::vector<Winner>& winners() const { return winners_; }

  // [comm lock] For a call of `spec` whose top selection layer is the model:
  // true when the call ends an epoch after which a class's round is over and
  // a checkpoint is due (the caller drains, calls decide(), then next()
  // again for this call). Otherwise sets `algo` to the candidate to try
  // (null: nothing to try, use the map) and `trial` to where its time goes.
  // `wire`: the communicator's wire format where the call carries it (kOff
  // otherwise). A class's candidates are those of its first call, and its
  // winner serves every later call of the class, with or without a wire: a
  // class decided with bf16 on (native not tried where the link bounds it)
  // keeps its schedule after set_wire("off") or for float64 payloads.
  bool next(const algorithms::CollectiveSpec& spec, const tuning::ModelSelection& model, WireFormat wire,
            const algorithms::AlgorithmInfo*& algo, Trial& trial);
  // [comm lock] A blocking timed call ran from `start` to `end` here.
  void recordTime(const Trial& trial, core::Clock::time_point start, core::Clock::time_point end);
  // [comm lock] An asynchronous timed call was launched at `launched`; its
  // time (its share, OpState::sharedUs) and its completion
  // (OpState::completedAt) are read from `state` at the decision.
  void recordLaunch(const Trial& trial, std::shared_ptr<const executor::OpState> state,
                    core::Clock::time_point launched);
  // [comm lock, nothing in flight] Collective over `world`: the checkpoint
  // of `coll`'s classes whose round is over, in class order: agrees on the
  // times so far, drops the candidates that cannot win and, after a class's
  // last round, keeps its winner (the caller then rebuilds the selection
  // map from winners()).
  void decide(Collective coll, transport::Transport& world);
  // The fastest candidate of `racing` and the runner-up, in `racing`'s
  // order, when the runner-up's median (`medianUs`, by candidate: weighed,
  // see weighed()) is within kTieMargin of the fastest's (a near tie); empty
  // otherwise.
  static std::vector<std::size_t> nearTies(const std::vector<double>& medianUs,
                                           const std::vector<std::size_t>& racing);
  // Where the winner among `racing` (winnerAmong, raw medians) would be a
  // schedule other than the model's choice, and that choice is racing with a
  // time: the two, in `racing`'s order (a class of fewer than kRounds rounds
  // gives them more rounds: a schedule's trial over Gloo's pairs swings
  // from call to call, and one sample displaced the model's choice, ring, at
  // 2 x 1 with the bf16 wire: rhd 98.7 against ring's 129.8 ms, where ring
  // forced runs the step at 1.62x gloo's and rhd at 1.37-1.39x). Empty otherwise.
  // What a near tie is judged by (nearTies): weighed(), with a schedule
  // that cannot displace the model's choice (racing, with a time) left out
  // (infinity): the tie round goes to two candidates that can win.
  static std::vector<double> tieTimes(const std::vector<std::string_view>& names, const std::vector<double>& medianUs,
                                      const std::vector<std::size_t>& racing, double nativeMargin);
  static std::vector<std::size_t> challenge(const std::vector<std::string_view>& names,
                                            const std::vector<double>& medianUs,
                                            const std::vector<std::size_t>& racing, double nativeMargin);

 private:
  struct Sample {
    double us = -1.0;  // < 0: none; scaled to the class's first payload
    double scale = 1.0;  // the class's first payload / this call's
    std::shared_ptr<const executor::OpState> state;  // async: read at the decision
  };
  struct ClassState {
    bool started = false;
    bool decided = false;
    bool triedThisEpoch = false;
    int round = 0;        // the round under way
    int rounds = kRounds;  // of this class (1 from kOneRoundUs; each near tie adds one)
    std::size_t at = 0;   // the position in `racing` of this epoch's candidate (racing.size(): round over)
    std::size_t firstBytes = 0;  // the class's first call's payload: times are scaled to it
    std::vector<const algorithms::AlgorithmInfo*> candidates;
    std::vector<std::size_t> racing;  // indices of the candidates still in the race
    std::vector<double> agreedUs;     // each candidate's slowest-rank median at its last checkpoint
    std::vector<bool> dropped;        // out of the race as too slow (dropSlow)
    std::vector<std::vector<Sample>> samples;  // [candidate]: every trial call it ran
    const algorithms::AlgorithmInfo* winner = nullptr;  // once decided (null: the model's choice stays)
    // Where native's median and the best schedule's lie within kTieMargin
    // of each other: the one of the two that did not win, which the step
    // check times against the winner in whole epochs.
    const algorithms::AlgorithmInfo* rival = nullptr;
  };

  // One epoch of the step check, its calls timed together.
  struct EpochSpan {
    int calls = 0;  // the epoch's calls (of kMinBytes or more)
    int timed = 0;  // of them, recorded (recordTime, recordLaunch)
    core::Clock::time_point firstLaunch = core::Clock::time_point::max();
    core::Clock::time_point lastEnd{};  // of the blocking calls
    std::vector<std::shared_ptr<const executor::OpState>> states;  // the asynchronous calls
  };
  // An epoch's span (us; infinity: a call not timed, or failed).
  static double spanOf(const EpochSpan& e);
  // A collective's trials: its epoch under way and its classes in the race.
  struct CollectiveTrials {
    std::vector<std::size_t> seen;  // the payloads of the epoch's calls, in order (empty: none yet)
    // Those of the last step (its epochs, merged) and whether it is still
    // open (its epochs so far had one call each, fewer than kEpochCalls).
    std::vector<std::size_t> step;
    bool stepOpen = false;
    int classesRacing = 0;          // started and not decided
    bool checkpointDue = false;     // an epoch ended a class's round; decide() clears it once it ran
    int racingCalls = 0;            // the epoch's calls of classes still in the race
    // The step check: its arms ("": the mix; then each winner or rival
    // for every call), the epochs still to run (0: none under way), the
    // epoch under way, each arm's epochs, and how many classes had winners
    // when it was last considered.
    std::vector<int> checkClasses;  // the classes of the epoch it was started after
    std::vector<std::string_view> arms;
    int checkEpochs = 0;
    bool interimChecked = false;  // its checkpoint after two epochs of each arm ran
    EpochSpan epoch;
    std::vector<std::vector<EpochSpan>> armEpochs;
    int considered = 0;
    bool checkWanted = false;  // a decision waits for a whole step to start the check after
    bool seenBeforeClass = false;  // seen starts with calls from before the class racing now began
    std::string checkedWinners;  // for the log: "8 MiB - 16 MiB native, 16 MiB - 32 MiB hier"
  };
  static int classOf(std::size_t bytes);
  ClassState& state(Collective coll, int cls) {
    return classes_[static_cast<std::size_t>(coll)][static_cast<std::size_t>(cls)];
  }
  void startClass(ClassState& s, const algorithms::CollectiveSpec& spec, const tuning::ModelSelection& model,
                  WireFormat wire);
  // A class's round is over (started, not decided, every candidate in the
  // race had its epoch): its checkpoint is due.
  static bool roundOver(const ClassState& s) { return s.started && !s.decided && s.at == s.racing.size(); }
  // Whether a call of `bytes` ends the epoch of `t` (of at least one call).
  static bool endsEpoch(const CollectiveTrials& t, std::size_t bytes);
  // Ends `coll`'s epoch: every class that tried a candidate in it moves to
  // the next; true when a class's round is over (a checkpoint is due).
  bool endEpoch(Collective coll);
  // A new sample of `trial`'s candidate (null: not a trial).
  Sample* addSample(const Trial& trial);
  // A due class's checkpoint (collective).
  void decideClass(Collective coll, int cls, transport::Transport& world);
  // decideClass's parts: the slowest rank's median [0, n) and fastest call
  // [n, 2n) of each candidate (collective); the candidates out of the race
  // after a round (their names, "" when none); the winner among those left
  // (candidates.size(): none).
  static std::vector<double> agreeOnTimes(ClassState& s, transport::Transport& world);
  static std::string dropSlow(ClassState& s, const double* medianUs, const double* fastestUs);
  std::size_t winnerOf(const ClassState& s) const;
  // The rival of `winner` (an index into s.candidates); null: none. See ClassState::rival.
  static const algorithms::AlgorithmInfo* rivalOf(const ClassState& s, std::size_t winner);
  static std::vector<std::string_view> namesOf(const ClassState& s);  // the candidates' names, in order
  // The candidate of `s` named `name` (null: none; "" names none).
  static const algorithms::AlgorithmInfo* candidateNamed(const ClassState& s, std::string_view name);
  // After `coll`'s classes are decided (all of them, or those of an epoch):
  // where a winner or rival of the classes of the epoch just ended
  // would run some call of it other than the mix does, the step check's
  // epochs begin.
  void startStepCheck(Collective coll);
  // Whether the step check's interim checkpoint is due: every arm ran two
  // of its kCheckEpochs epochs, and it has not run yet.
  static bool interimDue(const CollectiveTrials& t) {
    static_assert(kCheckEpochs > 2, "the interim checkpoint leaves a round to run");
    return !t.interimChecked && t.checkEpochs == static_cast<int>(t.arms.size()) * (kCheckEpochs - 2);
  }
  // The arm of the step check's epoch under way.
  static std::size_t armOf(const CollectiveTrials& t) {
    const int n = static_cast<int>(t.arms.size());
    return static_cast<std::size_t>((n * kCheckEpochs - t.checkEpochs) % n);
  }
  // The step check's decision, once its epochs ran (collective over `world`).
  void stepCheck(Collective coll, transport::Transport& world);

  bool enabled_;
  bool log_;
  double nativeMargin_;
  std::array<std::array<ClassState, kClasses>, kNumCollectives> classes_{};
  std::array<CollectiveTrials, kNumCollectives> trials_{};
  std::vector<Winner> winners_;
};

}  // namespace boostcomm::tuning
