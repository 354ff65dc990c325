// CUDA graphs: stream capture, instantiation with flags, launch, explicit nodes (names as the CUDA
// Runtime API reference spells them), written for porter's tests.
#include <hip/hip_runtime.h>

__global__ void inc(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 1.0f;
}

int run_graph(int n) {
    hipStream_t s;
    hipStreamCreate(&s);
    float* x;
    hipMalloc(&x, n * sizeof(float));
    hipGraph_t g;
    hipGraphExec_t e;
    hipStreamBeginCapture(s, hipStreamCaptureModeGlobal);
    hipLaunchKernelGGL(inc, (n + 255) / 256, 256, 0, s, x, n);
    hipStreamEndCapture(s, &g);
    hipGraphInstantiateWithFlags(&e, g, 0);
    for (int k = 0; k < 3; ++k) hipGraphLaunch(e, s);
    hipStreamSynchronize(s);
    size_t nodes = 0;
    hipGraphGetNodes(g, nullptr, &nodes);
    hipGraph_t g2;
    hipGraphNode_t empty;
    hipGraphCreate(&g2, 0);
    hipGraphAddEmptyNode(&empty, g2, nullptr, 0);
    hipGraphNodeType type;
    hipGraphNodeGetType(empty, &type);
    hipFuncSetAttribute((const void*)inc, hipFuncAttributeMaxDynamicSharedMemorySize, 0);
    hipGraphExecDestroy(e);
    hipGraphDestroy(g);
    hipGraphDestroy(g2);
    hipFree(x);
    hipStreamDestroy(s);
    return type == hipGraphNodeTypeEmpty ? (int)nodes : -1;
}
