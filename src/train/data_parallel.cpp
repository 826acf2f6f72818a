#include "train/data_parallel.h"

#include <fmt/format.h>
#include <sched.h>

#include <algorithm>
#include <thread>

#include "dist/comm.h"

namespace rnntrain {

bool DataParallel::root() const { return comm_.root(); }
bool DataParallel::distributed() const { return comm_.distributed(); }
Comm* DataParallel::engine_ranks() const { return comm_.launched() ? &comm_ : nullptr; }

Config DataParallel::for_engine(Config cfg) const {
  if (cfg.train.threads != 0 || !distributed()) return cfg;
  const int64_t cores = std::thread::hardware_concurrency();
  int64_t allowed = cores;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) allowed = CPU_COUNT(&set);
  cfg.train.threads = std::max<int64_t>(1, std::min<int64_t>(allowed, cores / comm_.local_size()));
  return cfg;
}

void DataParallel::agree_plan(PlanSpec& plan) const {
  if (!distributed()) return;
  int chosen[3] = {static_cast<int>(plan.fuse), static_cast<int>(plan.precision), static_cast<int>(plan.algo)};
  comm_.broadcast(chosen, sizeof chosen);
  plan.fuse = static_cast<FuseMode>(chosen[0]);
  plan.precision = static_cast<Precision>(chosen[1]);
  plan.algo = static_cast<RnnAlgo>(chosen[2]);
}

void DataParallel::seed_step(int64_t step) {
  if (!distributed()) return;
  rank_dropout_.reseed(epoch_key_ ^ (0x94d049bb133111ebull * static_cast<uint64_t>(step + 1)) ^
                       (0x9e3779b97f4a7c15ull * static_cast<uint64_t>(comm_.rank() + 1)));
}

EpochBatch DataParallel::share(const EpochBatch& global) const {
  if (!distributed()) return global;
  const Share sh = share_of(static_cast<int64_t>(global.rows.size()), comm_.rank(), comm_.size());
  return {{global.rows.begin() + sh.first, global.rows.begin() + sh.first + sh.count}, global.steps};
}

int64_t DataParallel::first_batch() const { return comm_.rank(); }
int64_t DataParallel::batch_stride() const { return comm_.size(); }

int DataParallel::agree_stop(int signal) const { return distributed() ? comm_.max(signal) : signal; }

std::vector<double> metric_state(const std::vector<Metric*>& ms, double sum, double count) {
  std::vector<double> t{sum, count};
  for (const Metric* m : ms) {
    const std::vector<double> s = m->state();
    t.insert(t.end(), s.begin(), s.end());
  }
  return t;
}

void merge_metric_state(const std::vector<Metric*>& ms, const std::vector<double>& t) {
  size_t at = 2;
  for (Metric* m : ms) {
    m->merge(t.data() + at);
    at += m->state_size();
  }
}

void DataParallel::reduce_metrics(const std::vector<Metric*>& ms, double* sum, double* count) const {
  if (!distributed()) return;
  std::vector<double> t = metric_state(ms, sum ? *sum : 0.0, count ? *count : 0.0);
  comm_.allreduce_sum(t.data(), static_cast<int64_t>(t.size()));
  if (sum) *sum = t[0];
  if (count) *count = t[1];
  for (Metric* m : ms) m->reset();
  merge_metric_state(ms, t);
}

bool DataParallel::broadcast(Params& params) const {
  if (!distributed()) return false;
  for (Param* p : params.all())
    comm_.broadcast(p->value.ptr(), static_cast<int64_t>(sizeof(float)) * p->value.numel());
  return true;
}

void DataParallel::barrier() const {
  if (distributed()) comm_.max(0);
}

std::string DataParallel::describe_batch(int64_t bs) const {
  if (!distributed()) return "";
  const int64_t n = comm_.size();
  return fmt::format("train.batch_size {} is the global batch: {} ranks take {}{} sequences of each", bs, n, bs / n,
                     bs % n ? fmt::format(" or {}", bs / n + 1) : "");
}

}  // namespace rnntrain
