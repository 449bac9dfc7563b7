package agent

import "testing"

func TestCapabilitiesStabilityNamespacesFeatures(t *testing.T) {
	r := newRig(t, nil)
	caps, e := callAs[capabilities](t, r, admin, "system_get_capabilities", nil)
	if e != nil {
		t.Fatal(e)
	}
	stability := map[string]string{}
	for _, d := range caps.Domains {
		if ns, ok := caps.ToolNamespaces[d.Name]; !ok || ns.Default != "1" {
			t.Errorf("namespace %s: %+v", d.Name, ns)
		}
		for _, tl := range d.Tools {
			stability[tl.ID] = tl.Stability
		}
	}
	for id, want := range map[string]string{
		"gpio.write_pin": "stable", "system.reboot": "stable", "metrics.get_samples": "stable",
		"process.send_signal": "beta", "system.get_detailed_network_info": "beta", "service.validate_unit_file": "beta", // planned for a later phase in the tool catalog
		"metrics.get_summary": "beta", "change.prepare": "beta", // not in the tool catalog
	} {
		if stability[id] != want {
			t.Errorf("%s: stability %q, want %q", id, stability[id], want)
		}
	}
	for feature, want := range map[string]bool{"gpio.event_detection": false, "camera.video_recording": false, "gpio.control": true, "i2c.bus_access": true} {
		if got, ok := caps.Features[feature]; !ok || got != want {
			t.Errorf("feature %s: %v (listed %v), want %v", feature, got, ok, want)
		}
	}
}

// The board is named by one function: both tools agree, on the sim board too.
func TestServerStatusAgreesWithCapabilitiesOnTheBoard(t *testing.T) {
	r := newRig(t, nil)
	caps, _ := callAs[capabilities](t, r, admin, "system_get_capabilities", nil)
	st, _ := callAs[ServerStatus](t, r, admin, "manage_get_server_status", nil)
	if !caps.Device.IsRaspberryPi {
		t.Fatalf("the sim board is not a Raspberry Pi: %+v", caps.Device)
	}
	diff(t, "server status's device", caps.Device, st.Device)
}
