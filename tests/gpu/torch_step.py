# One training step of a small transformer on the GPU (random weights and data, nothing
# downloaded): warm-up steps, then the median of timed steps, printed as "step_ms MS".
# Run as it is and under `rgpu run` (tests/gpu/run_from_tarball.sh compares the two).
import statistics
import time

import torch

torch.manual_seed(0)
device = "cuda"
layer = torch.nn.TransformerEncoderLayer(d_model=256, nhead=8, dim_feedforward=1024,
                                         batch_first=True)
model = torch.nn.TransformerEncoder(layer, num_layers=4).to(device)
head = torch.nn.Linear(256, 1000).to(device)
optimizer = torch.optim.AdamW(list(model.parameters()) + list(head.parameters()), lr=1e-4)
x = torch.randn(16, 128, 256, device=device)
y = torch.randint(0, 1000, (16, 128), device=device)


def step():
    optimizer.zero_grad(set_to_none=True)
    logits = head(model(x))
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 1000), y.reshape(-1))
    loss.backward()
    optimizer.step()
    return loss


for _ in range(5):
    step()
torch.cuda.synchronize()
times = []
for _ in range(20):
    start = time.perf_counter()
    loss = step()
    torch.cuda.synchronize()
    times.append((time.perf_counter() - start) * 1e3)
assert torch.isfinite(loss).item()
print("loss %.4f" % loss.item())
print("step_ms %.3f" % statistics.median(times))
