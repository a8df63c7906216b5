"""Which tensor-core shapes the Vulkan driver offers, and which of them reach WGSL.

torch's float32 attention runs on the tensor cores (docs/records/gpu.md); WGSL reaches them
only through subgroup matrices, and only with the types its implementation lets through.
This prints, per part, each in a process of its own (Dawn and wgpu-native export the same C
symbols):

- vulkan: each physical device's 16-bit float features (`shaderFloat16`, the 16-bit storage
  features) and its cooperative-matrix shapes (`VK_KHR_cooperative_matrix`), through the
  Vulkan loader itself;
- dawn: whether Dawn offers `shader-f16` and `chromium-experimental-subgroup-matrix`, its
  subgroup-matrix configurations, and its answer to a device request for `shader-f16`
  (with `allow_unsafe_apis`, which the experimental feature needs);
- wgpu: whether wgpu-native lists `shader-f16` and `cooperative-matrix`, and its answer to
  a device request for `cooperative-matrix`.

    python3 benchmarks/tensor_core_features.py [--part vulkan|dawn|wgpu]

What it found on an H100 (driver 580): docs/runtimes.md.
"""

from __future__ import annotations

import argparse
import ctypes as C
import subprocess
import sys

PARTS = ("vulkan", "dawn", "wgpu")
VK_API_1_3 = (1 << 22) | (3 << 12)
# VkStructureType values
APPLICATION_INFO, INSTANCE_CREATE_INFO = 0, 1
FEATURES_2, FLOAT16_INT8_FEATURES, STORAGE_16BIT_FEATURES = 1000059000, 1000082000, 1000083000
COOPERATIVE_MATRIX_PROPERTIES = 1000506001
# VkComponentTypeKHR values
COMPONENT = {0: "f16", 1: "f32", 2: "f64", 3: "s8", 4: "s16", 5: "s32", 6: "s64", 7: "u8"}
COMPONENT |= {8: "u16", 9: "u32", 10: "u64", 1000141000: "bf16"}
DEVICE_NAME_OFFSET, DEVICE_NAME_SIZE = 20, 256  # in VkPhysicalDeviceProperties


class _Struct(C.Structure):
    def values(self) -> dict[str, int]:
        return {name: getattr(self, name) for name, _ in self._fields_[2:]}


class AppInfo(C.Structure):
    _fields_ = [
        ("sType", C.c_int32),
        ("pNext", C.c_void_p),
        ("pApplicationName", C.c_char_p),
        ("applicationVersion", C.c_uint32),
        ("pEngineName", C.c_char_p),
        ("engineVersion", C.c_uint32),
        ("apiVersion", C.c_uint32),
    ]


class InstanceInfo(C.Structure):
    _fields_ = [
        ("sType", C.c_int32),
        ("pNext", C.c_void_p),
        ("flags", C.c_uint32),
        ("pApplicationInfo", C.POINTER(AppInfo)),
        ("enabledLayerCount", C.c_uint32),
        ("ppEnabledLayerNames", C.c_void_p),
        ("enabledExtensionCount", C.c_uint32),
        ("ppEnabledExtensionNames", C.c_void_p),
    ]


class Float16Int8(_Struct):
    _fields_ = [
        ("sType", C.c_int32),
        ("pNext", C.c_void_p),
        ("shaderFloat16", C.c_uint32),
        ("shaderInt8", C.c_uint32),
    ]


class Storage16Bit(_Struct):
    _fields_ = [
        ("sType", C.c_int32),
        ("pNext", C.c_void_p),
        ("storageBuffer16BitAccess", C.c_uint32),
        ("uniformAndStorageBuffer16BitAccess", C.c_uint32),
        ("storagePushConstant16", C.c_uint32),
        ("storageInputOutput16", C.c_uint32),
    ]


class Features2(C.Structure):
    _fields_ = [("sType", C.c_int32), ("pNext", C.c_void_p), ("features", C.c_uint32 * 55)]


class CooperativeMatrix(C.Structure):
    _fields_ = [
        ("sType", C.c_int32),
        ("pNext", C.c_void_p),
        ("M", C.c_uint32),
        ("N", C.c_uint32),
        ("K", C.c_uint32),
        ("A", C.c_int32),
        ("B", C.c_int32),
        ("C", C.c_int32),
        ("Result", C.c_int32),
        ("saturatingAccumulation", C.c_uint32),
        ("scope", C.c_int32),
    ]

    def __str__(self) -> str:
        a, b, c, r = (COMPONENT.get(t, str(t)) for t in (self.A, self.B, self.C, self.Result))
        return f"{self.M}x{self.N}x{self.K} {a}*{b}+{c}->{r}"


def vulkan_part() -> None:
    vk = C.CDLL("libvulkan.so.1")
    app = AppInfo(APPLICATION_INFO, None, b"tensor_core_features", 1, b"", 0, VK_API_1_3)
    info = InstanceInfo(INSTANCE_CREATE_INFO, None, 0, C.pointer(app), 0, None, 0, None)
    instance = C.c_void_p()
    if (err := vk.vkCreateInstance(C.byref(info), None, C.byref(instance))) != 0:
        raise SystemExit(f"vkCreateInstance failed: VkResult {err}")
    count = C.c_uint32(0)
    vk.vkEnumeratePhysicalDevices(instance, C.byref(count), None)
    devices = (C.c_void_p * count.value)()
    vk.vkEnumeratePhysicalDevices(instance, C.byref(count), devices)
    proc = vk.vkGetInstanceProcAddr
    proc.restype, proc.argtypes = C.c_void_p, [C.c_void_p, C.c_char_p]
    coop = proc(instance, b"vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR")
    for device in map(C.c_void_p, devices):
        props = C.create_string_buffer(1024)  # VkPhysicalDeviceProperties is 824 bytes
        vk.vkGetPhysicalDeviceProperties(device, props)
        raw_name = props.raw[DEVICE_NAME_OFFSET : DEVICE_NAME_OFFSET + DEVICE_NAME_SIZE]
        f16 = Float16Int8(FLOAT16_INT8_FEATURES, None)
        s16 = Storage16Bit(STORAGE_16BIT_FEATURES, C.cast(C.pointer(f16), C.c_void_p))
        chain = Features2(FEATURES_2, C.cast(C.pointer(s16), C.c_void_p))
        vk.vkGetPhysicalDeviceFeatures2(device, C.byref(chain))
        name = raw_name.split(b"\0")[0].decode()
        print(f"vulkan {name}: {f16.values()} {s16.values()}")
        shapes = _cooperative_matrices(coop, device) if coop else []
        print(f"vulkan cooperative matrices: {', '.join(shapes) or 'none'}")


def _cooperative_matrices(fn_address: int, device: C.c_void_p) -> list[str]:
    get = C.CFUNCTYPE(C.c_int32, C.c_void_p, C.POINTER(C.c_uint32), C.c_void_p)(fn_address)
    count = C.c_uint32(0)
    get(device, C.byref(count), None)
    shapes = (CooperativeMatrix * count.value)()
    for shape in shapes:
        shape.sType = COOPERATIVE_MATRIX_PROPERTIES
    get(device, C.byref(count), C.cast(shapes, C.c_void_p))
    return sorted({str(s) for s in shapes})


def dawn_part() -> None:
    from wgpudawn.backends.dawn import extras  # type: ignore[import-not-found]

    from py_harness.host.gpu import native

    extras.set_instance_extras(enable_toggles=["allow_unsafe_apis"])  # before native.load
    adapter = native.load("dawn").gpu.request_adapter_sync(power_preference="high-performance")
    wanted = ("shader-f16", "subgroups", "chromium-experimental-subgroup-matrix")
    print(f"dawn {adapter.info.get('device')}: " + _listed(adapter.features, wanted))
    configs = extras.get_adapter_properties(adapter).get("subgroup_matrix_configs") or []
    shapes = [
        f"{c['m']}x{c['n']}x{c['k']} {c['component_type']}->{c['result_component_type']}"
        for c in configs
    ]
    print(f"dawn subgroup matrices: {', '.join(shapes) or 'none'}")
    try:
        extras.request_device_sync(adapter, required_features=["shader-f16"])
        print("dawn device with shader-f16: made")
    except Exception as exc:  # the refusal's words are the finding
        print(f"dawn device with shader-f16: refused: {_words(exc)}")


def wgpu_part() -> None:
    from py_harness.host.gpu import native

    adapter = native.load("wgpu").gpu.request_adapter_sync(power_preference="high-performance")
    wanted = ("shader-f16", "subgroup", "cooperative-matrix")
    print(f"wgpu {adapter.info.get('device')}: " + _listed(adapter.features, wanted))
    if "cooperative-matrix" in adapter.features:
        try:
            adapter.request_device_sync(required_features=["cooperative-matrix"])
            print("wgpu device with cooperative-matrix: made")
        except Exception as exc:
            print(f"wgpu device with cooperative-matrix: refused: {_words(exc)}")


def _words(exc: Exception) -> str:
    """An implementation's message on one line, without the source locations Dawn adds."""
    lines = [line.strip() for line in str(exc).splitlines()]
    return " / ".join(line for line in lines if line and not line.startswith("at "))


def _listed(features: set[str], wanted: tuple[str, ...]) -> str:
    return ", ".join(f"{name} {'yes' if name in features else 'no'}" for name in wanted)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=PARTS, help="one part only (default: all, each alone)")
    args = parser.parse_args(argv)
    if args.part:
        {"vulkan": vulkan_part, "dawn": dawn_part, "wgpu": wgpu_part}[args.part]()
        return 0
    failed = 0
    for part in PARTS:
        sys.stdout.flush()
        run = subprocess.run([sys.executable, __file__, "--part", part], check=False)
        failed |= run.returncode != 0
    return int(failed)


if __name__ == "__main__":
    raise SystemExit(main())
