// CUDA graphs: stream capture, instantiation with flags, launch, explicit nodes (names as the CUDA
// Runtime API reference spells them), written for porter's tests.
#include <cuda_runtime.h>

__global__ void inc(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 1.0f;
}

int run_graph(int n) {
    cudaStream_t s;
    cudaStreamCreate(&s);
    float* x;
    cudaMalloc(&x, n * sizeof(float));
    cudaGraph_t g;
    cudaGraphExec_t e;
    cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    inc<<<(n + 255) / 256, 256, 0, s>>>(x, n);
    cudaStreamEndCapture(s, &g);
    cudaGraphInstantiateWithFlags(&e, g, 0);
    for (int k = 0; k < 3; ++k) cudaGraphLaunch(e, s);
    cudaStreamSynchronize(s);
    size_t nodes = 0;
    cudaGraphGetNodes(g, nullptr, &nodes);
    cudaGraph_t g2;
    cudaGraphNode_t empty;
    cudaGraphCreate(&g2, 0);
    cudaGraphAddEmptyNode(&empty, g2, nullptr, 0);
    cudaGraphNodeType type;
    cudaGraphNodeGetType(empty, &type);
    cudaFuncSetAttribute((const void*)inc, cudaFuncAttributeMaxDynamicSharedMemorySize, 0);
    cudaGraphExecDestroy(e);
    cudaGraphDestroy(g);
    cudaGraphDestroy(g2);
    cudaFree(x);
    cudaStreamDestroy(s);
    return type == cudaGraphNodeTypeEmpty ? (int)nodes : -1;
}
