// A C++ workload for test_preload.sh: threads build std::maps of strings and
// vectors through operator new, merge them under a mutex, and the program
// prints a summary that does not depend on scheduling, so that runs with and
// without hakmem preloaded can be compared byte for byte.
#include <cstdint>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace
{

const int thread_count = 4;
const int keys_per_thread = 60000;

std::uint64_t next_random(std::uint64_t &state)
{
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return state >> 17;
}

struct Totals {
    std::mutex lock;
    std::map<std::string, std::uint64_t> counts;
    std::map<int, std::vector<int>> lists;
};

void build_and_merge(int id, Totals &totals)
{
    std::uint64_t rng = 1000 + id;
    std::map<std::string, std::uint64_t> counts;
    std::map<int, std::vector<int>> lists;
    std::vector<std::unique_ptr<std::string>> scratch;

    for (int i = 0; i < keys_per_thread; i++) {
        std::uint64_t value = next_random(rng);
        std::string key = "key-" + std::to_string(value % 20000);
        counts[key] += value % 97;
        lists[static_cast<int>(value % 500)].push_back(static_cast<int>(value % 100000));
        // Short-lived heap strings of varied length, some freed out of order.
        scratch.emplace_back(new std::string(value % 300, static_cast<char>('a' + i % 26)));
        if (scratch.size() > 64) {
            scratch.erase(scratch.begin() + static_cast<long>(value % scratch.size()));
        }
    }

    std::lock_guard<std::mutex> guard(totals.lock);
    for (const auto &entry : counts) {
        totals.counts[entry.first] += entry.second;
    }
    for (auto &entry : lists) {
        auto &merged = totals.lists[entry.first];
        merged.insert(merged.end(), entry.second.begin(), entry.second.end());
    }
}

} // namespace

int main()
{
    Totals totals;
    std::vector<std::thread> threads;

    for (int id = 0; id < thread_count; id++) {
        threads.emplace_back(build_and_merge, id, std::ref(totals));
    }
    for (auto &thread : threads) {
        thread.join();
    }

    std::uint64_t count_sum = 0;
    for (const auto &entry : totals.counts) {
        count_sum += entry.second;
    }
    std::cout << "distinct keys: " << totals.counts.size() << "\n";
    std::cout << "sum of counts: " << count_sum << "\n";
    int shown = 0;
    for (const auto &entry : totals.counts) {
        if (shown++ % 1000 == 0) {
            std::cout << entry.first << " = " << entry.second << "\n";
        }
    }
    // The order of elements inside a merged list depends on which thread
    // merged first, so only order-independent figures are printed.
    for (const auto &entry : totals.lists) {
        std::uint64_t list_sum = 0;
        for (int value : entry.second) {
            list_sum += static_cast<std::uint64_t>(value);
        }
        if (entry.first % 50 == 0) {
            std::cout << "list " << entry.first << ": " << entry.second.size() << " values, sum "
                      << list_sum << "\n";
        }
    }
    return 0;
}
