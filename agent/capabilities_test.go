package agent

import "testing"

func TestCapabilitiesStabilityNamespacesFeatures(t *testing.T) {
	r := newRig(t, nil)
	res, sc := r.as(admin, "system_get_capabilities", nil)
	if res.IsError {
		t.Fatal(sc)
	}
	stability := map[string]string{}
	for _, d := range sc["domains"].([]any) {
		dm := d.(map[string]any)
		ns, ok := sc["tool_namespaces"].(map[string]any)[dm["name"].(string)].(map[string]any)
		if !ok || ns["default"] != "1" {
			t.Errorf("namespace %v: %v", dm["name"], ns)
		}
		for _, tl := range dm["tools"].([]any) {
			tm := tl.(map[string]any)
			stability[tm["id"].(string)] = tm["stability"].(string)
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
	f := sc["capabilities"].(map[string]any)
	if f["gpio.event_detection"] != false || f["camera.video_recording"] != false || f["gpio.control"] != true || f["i2c.bus_access"] != true {
		t.Errorf("features: %v", f)
	}
}

// The board is named by one function: both tools agree, on the sim board too.
func TestServerStatusAgreesWithCapabilitiesOnTheBoard(t *testing.T) {
	r := newRig(t, nil)
	_, caps := r.as(admin, "system_get_capabilities", nil)
	_, st := r.as(admin, "manage_get_server_status", nil)
	c, s := caps["device"].(map[string]any), st["device"].(map[string]any)
	if c["is_raspberry_pi"] != true || s["is_raspberry_pi"] != c["is_raspberry_pi"] || s["model"] != c["model"] {
		t.Fatalf("capabilities %v, server status %v", c, s)
	}
}
