#include "registry/billing.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <fstream>
#include <iterator>
#include <sstream>

namespace rgpu::registry {
namespace {

Status LineError(int line, const std::string& why) {
  return InvalidArgument("price list line " + std::to_string(line) + ": " + why);
}

bool ReadNumber(std::istringstream& in, double* value) {
  std::string word;
  if (!(in >> word)) return false;
  char* end = nullptr;
  *value = strtod(word.c_str(), &end);
  return end != word.c_str() && *end == '\0' && std::isfinite(*value);
}

}  // namespace

Status PriceList::Parse(const std::string& text, PriceList* out) {
  PriceList prices;
  std::istringstream lines(text);
  std::string line;
  int number = 0;
  while (std::getline(lines, line)) {
    ++number;
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream in(line);
    std::string key;
    if (!(in >> key)) continue;
    double a = 0, b = 0;
    if (key == "currency") {
      if (!(in >> prices.currency)) return LineError(number, "currency needs a name");
    } else if (key == "burst_premium_per_gb" || key == "priority_cap" || key == "provider_share" ||
               key == "hold_fraction" || key == "reservation_fraction") {
      if (!ReadNumber(in, &a) || a < 0) return LineError(number, key + " needs a number >= 0");
      if (key == "burst_premium_per_gb") prices.burst_premium_per_gb = a;
      if (key == "hold_fraction") prices.hold_fraction = a;
      if (key == "reservation_fraction") prices.reservation_fraction = a;
      if (key == "priority_cap") {
        if (a < 1) return LineError(number, "priority_cap must be >= 1");
        prices.priority_cap = a;
      }
      if (key == "provider_share") {
        if (a > 1) return LineError(number, "provider_share must be <= 1");
        prices.provider_share = a;
      }
    } else if (key == "billing_period") {
      std::string period;
      in >> period;
      if (period == "monthly") {
        prices.billing_period = BillingPeriod::kMonthly;
      } else if (period == "weekly") {
        prices.billing_period = BillingPeriod::kWeekly;
      } else if (period == "daily") {
        prices.billing_period = BillingPeriod::kDaily;
      } else {
        return LineError(number, "billing_period must be monthly, weekly or daily");
      }
    } else if (key == "priority") {
      int p = 0;
      if (!(in >> p) || !ReadNumber(in, &a) || a < 0) {
        return LineError(number, "expected: priority P COEFFICIENT");
      }
      prices.priority_coefficient[p] = a;
    } else if (key == "preemption") {
      int p = 0;
      long notice = -1;
      if (!(in >> p) || !(in >> notice) || p < 0 || p > 9 || notice < 0 || notice > 86400) {
        return LineError(number,
                         "expected: preemption PRIORITY NOTICE_S (priority 0-9, notice 0-86400)");
      }
      prices.preemption_notice_s[p] = static_cast<uint32_t>(notice);
    } else if (key == "gpu" || key == "default_gpu") {
      if (!ReadNumber(in, &a) || !ReadNumber(in, &b) || a < 0 || b < 0) {
        return LineError(number, "expected: " + key + " UNIT_PRICE_PER_MS INCLUDED_GBPS" +
                                     (key == "gpu" ? " MODEL" : ""));
      }
      if (key == "default_gpu") {
        prices.default_gpu = {a, b};
      } else {
        std::string model;
        std::getline(in, model);
        model.erase(0, model.find_first_not_of(" \t"));
        model.erase(model.find_last_not_of(" \t\r") + 1);
        if (model.empty()) return LineError(number, "gpu needs a model name");
        prices.gpus[model] = {a, b};
      }
    } else {
      return LineError(number, "unknown setting '" + key + "'");
    }
    std::string extra;
    if (key != "gpu" && (in >> extra)) return LineError(number, "unexpected '" + extra + "'");
  }
  *out = std::move(prices);
  return Status::Ok();
}

Status PriceList::Load(const std::string& path, PriceList* out) {
  std::ifstream file(path);
  if (!file) return NotFound("cannot read price list " + path);
  std::stringstream text;
  text << file.rdbuf();
  Status s = Parse(text.str(), out);
  if (!s.ok()) return InvalidArgument(path + ": " + s.message());
  return s;
}

int64_t PeriodStart(BillingPeriod period, int64_t now_unix) {
  constexpr int64_t kDay = 86400;
  const int64_t day_start = now_unix - ((now_unix % kDay) + kDay) % kDay;
  switch (period) {
    case BillingPeriod::kDaily:
      return day_start;
    case BillingPeriod::kWeekly: {
      // 1970-01-01 was a Thursday: days since the last Monday.
      const int64_t days = day_start / kDay;
      return day_start - (((days + 3) % 7) + 7) % 7 * kDay;
    }
    case BillingPeriod::kMonthly:
    default: {
      const time_t t = static_cast<time_t>(now_unix);
      struct tm tm;
      gmtime_r(&t, &tm);
      tm.tm_mday = 1;
      tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
      return static_cast<int64_t>(timegm(&tm));
    }
  }
}

const char* PeriodName(BillingPeriod period) {
  switch (period) {
    case BillingPeriod::kDaily:
      return "daily";
    case BillingPeriod::kWeekly:
      return "weekly";
    default:
      return "monthly";
  }
}

const GpuPrice& PriceList::PriceFor(const std::string& model) const {
  auto it = gpus.find(model);
  return it == gpus.end() ? default_gpu : it->second;
}

double PriceList::CoefficientFor(int priority) const {
  auto it = priority_coefficient.find(priority);
  return it == priority_coefficient.end() ? 0.0 : it->second;
}

int64_t PriceList::PreemptionNoticeFor(int priority) const {
  auto it = preemption_notice_s.upper_bound(priority);
  if (it == preemption_notice_s.begin()) return -1;
  return std::prev(it)->second;
}

double BaseFee(double gpu_ms, double unit_price_per_ms) {
  return std::max(0.0, gpu_ms) * unit_price_per_ms;
}

double BurstPremium(double bytes, double seconds, double included_gbps, double premium_per_gb) {
  if (seconds <= 0) return 0;
  const double actual_gbps = bytes / 1e9 / seconds;
  return std::max(0.0, actual_gbps - included_gbps) * seconds * premium_per_gb;
}

double PriorityMultiplier(double coefficient, double queue_seconds, double cap) {
  const double m = std::pow(1.0 + coefficient, std::max(0.0, queue_seconds) / 3600.0);
  return std::min(m, std::max(1.0, cap));
}

double HeldMs(int64_t granted_ms, int64_t claimed_ms, int64_t end_ms) {
  const int64_t until = claimed_ms > 0 ? std::min(claimed_ms, end_ms) : end_ms;
  return until > granted_ms ? static_cast<double>(until - granted_ms) : 0.0;
}

double HoldFee(double held_ms, double unit_price_per_ms, double hold_fraction) {
  return std::max(0.0, held_ms) * unit_price_per_ms * hold_fraction;
}

InvoiceLine PriceHold(const std::string& lease_id, const std::string& tenant,
                      const std::string& provider, const std::string& server,
                      const std::string& model, double held_ms, const PriceList& prices) {
  const GpuPrice& price = prices.PriceFor(model);
  InvoiceLine line;
  line.set_tenant(tenant);
  line.set_provider(provider);
  line.set_server_name(server);
  line.set_model(model);
  line.set_lease_id(lease_id);
  line.set_held_ms(held_ms);
  line.set_unit_price(price.unit_price_per_ms);
  line.set_hold_price_per_ms(price.unit_price_per_ms * prices.hold_fraction);
  line.set_hold_fee(HoldFee(held_ms, price.unit_price_per_ms, prices.hold_fraction));
  line.set_priority_multiplier(1);
  line.set_total(line.hold_fee());
  return line;
}

InvoiceLine PriceReservation(const std::string& reservation_id, const std::string& tenant,
                             const std::string& provider, const std::string& server,
                             const std::string& model, double reserved_ms,
                             const PriceList& prices) {
  const GpuPrice& price = prices.PriceFor(model);
  InvoiceLine line;
  line.set_tenant(tenant);
  line.set_provider(provider);
  line.set_server_name(server);
  line.set_model(model);
  line.set_reservation_id(reservation_id);
  line.set_reserved_ms(std::max(0.0, reserved_ms));
  line.set_unit_price(price.unit_price_per_ms);
  line.set_reservation_price_per_ms(price.unit_price_per_ms * prices.reservation_fraction);
  line.set_reservation_fee(line.reserved_ms() * line.reservation_price_per_ms());
  line.set_priority_multiplier(1);
  line.set_total(line.reservation_fee());
  return line;
}

InvoiceLine PriceSession(const SessionUsage& u, const PriceList& prices) {
  const GpuPrice& price = prices.PriceFor(u.model());
  InvoiceLine line;
  line.set_tenant(u.tenant());
  line.set_provider(u.provider());
  line.set_server_name(u.server_name());
  line.set_session_id(u.session_id());
  line.set_job(u.job());
  line.set_model(u.model());
  line.set_gpu_ms(u.gpu_ms());
  line.set_unit_price(price.unit_price_per_ms);
  // Under a reservation the GPU time is the reservation's, billed on its own line.
  line.set_base_fee(u.reservation_id().empty() ? BaseFee(u.gpu_ms(), price.unit_price_per_ms) : 0);
  const double seconds = u.gpu_ms() / 1000.0;
  const double bytes = static_cast<double>(u.bytes_in()) + static_cast<double>(u.bytes_out());
  line.set_bandwidth_gbps(seconds > 0 ? bytes / 1e9 / seconds : 0);
  line.set_included_gbps(price.included_gbps);
  line.set_burst_premium(
      BurstPremium(bytes, seconds, price.included_gbps, prices.burst_premium_per_gb));
  line.set_queue_seconds(u.placement_queue_s());
  line.set_priority(u.priority());
  const double m = PriorityMultiplier(prices.CoefficientFor(u.priority()), u.placement_queue_s(),
                                      prices.priority_cap);
  line.set_priority_multiplier(m);
  line.set_priority_surcharge(line.base_fee() * (m - 1.0));
  line.set_total(line.base_fee() + line.burst_premium() + line.priority_surcharge());
  return line;
}

void Total(const PriceList& prices, Invoice* invoice) {
  double base = 0, burst = 0, surcharge = 0, hold = 0, reserved = 0;
  for (const auto& line : invoice->lines()) {
    base += line.base_fee();
    burst += line.burst_premium();
    surcharge += line.priority_surcharge();
    hold += line.hold_fee();
    reserved += line.reservation_fee();
  }
  invoice->set_currency(prices.currency);
  invoice->set_base_fee(base);
  invoice->set_burst_premium(burst);
  invoice->set_priority_surcharge(surcharge);
  invoice->set_hold_fee(hold);
  invoice->set_reservation_fee(reserved);
  invoice->set_total(base + burst + surcharge + hold + reserved);
  invoice->set_provider_share(prices.provider_share);
  invoice->set_earnings(invoice->total() * prices.provider_share);
}

}  // namespace rgpu::registry
