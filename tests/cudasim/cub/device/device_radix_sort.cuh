/* cub/device/device_radix_sort.cuh (CUDA simulator): DeviceRadixSort::SortPairs
 * with CUB's documented two-call protocol: with d_temp_storage NULL it only
 * reports the temporary storage it needs; then it sorts (stable, by the key
 * bits [begin_bit, end_bit), signed keys in numeric order) on the stream,
 * using the temporary storage as its working space. */
#ifndef ZT_CUDASIM_CUB_RADIX_SORT
#define ZT_CUDASIM_CUB_RADIX_SORT
#include <algorithm>
#include <limits>
#include <numeric>
#include <vector>
#include "cuda_runtime.h"

bool zt_sim_is_device(const void *p, size_t bytes);

namespace cub {
struct DeviceRadixSort {
    static size_t zt_al(size_t b) { return (b + 255) & ~(size_t)255; }
    template <class K, class V>
    static cudaError_t SortPairs(void *d_temp_storage, size_t &temp_storage_bytes, const K *keys_in,
                                 K *keys_out, const V *values_in, V *values_out, int num_items,
                                 int begin_bit = 0, int end_bit = (int)sizeof(K) * 8,
                                 cudaStream_t stream = 0) {
        if (num_items < 0 || begin_bit < 0 || end_bit > (int)sizeof(K) * 8 || begin_bit > end_bit)
            return cudaErrorInvalidValue;
        const size_t n = (size_t)num_items;
        const size_t need = zt_al(n * sizeof(K)) + zt_al(n * sizeof(V)) + 256;
        if (!d_temp_storage) {
            temp_storage_bytes = need;
            return cudaSuccess;
        }
        if (temp_storage_bytes < need || !zt_sim_is_device(d_temp_storage, need)) return cudaErrorInvalidValue;
        if (!n) return cudaSuccess;
        if (!zt_sim_is_device(keys_in, n * sizeof(K)) || !zt_sim_is_device(keys_out, n * sizeof(K)) ||
            !zt_sim_is_device(values_in, n * sizeof(V)) || !zt_sim_is_device(values_out, n * sizeof(V)))
            return cudaErrorInvalidValue;
        char *tmp = (char *)d_temp_storage;
        zt_sim_enqueue(stream, [=]() {
            K *kt = (K *)tmp;
            V *vt = (V *)(tmp + zt_al(n * sizeof(K)));
            std::copy(keys_in, keys_in + n, kt);
            std::copy(values_in, values_in + n, vt);
            std::vector<size_t> ix(n);
            std::iota(ix.begin(), ix.end(), (size_t)0);
            auto bits = [&](K k) {
                unsigned long long u = 0;
                memcpy(&u, &k, sizeof k);
                if (std::numeric_limits<K>::is_signed) u ^= 1ull << (sizeof(K) * 8 - 1);
                const int w = end_bit - begin_bit;
                u >>= begin_bit;
                return w >= 64 ? u : (u & ((1ull << w) - 1));
            };
            std::stable_sort(ix.begin(), ix.end(), [&](size_t a, size_t b) { return bits(kt[a]) < bits(kt[b]); });
            for (size_t i = 0; i < n; i++) {
                keys_out[i] = kt[ix[i]];
                values_out[i] = vt[ix[i]];
            }
        });
        return cudaSuccess;
    }
};
}   // namespace cub
#endif
