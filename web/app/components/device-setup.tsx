import { api } from '../api.ts';
import type { Device } from '../types.ts';
import { CopyValue } from './ui.tsx';

/** A model as `GET /v1/models` lists it. */
export interface Model {
  model: string;
  /** What a person calls it ("Shelly H&T Gen3"). */
  name: string;
  vendor: string;
  ingest_url_kind: string;
  identify: boolean;
}

/** The supported models (`GET /models`). */
export async function loadModels(): Promise<Model[]> {
  return (await api.get<{ data: Model[] }>('/models')).data;
}

/** A device's model as a person reads it: its name from `GET /models`, else its id. */
export function modelName(models: readonly Model[], model: string): string {
  return models.find((m) => m.model === model)?.name ?? model;
}

/** What `POST /devices` and `POST /devices/{id}/rotate-token` answer: the token appears only here. */
export interface IssuedDevice extends Device {
  ingest_token: string;
  ingest_url: string;
  issued_at: string;
}

/** How a model's readings reach the cloud, in words. */
export const INGEST_KINDS: Record<string, string> = {
  shelly_get: 'Wi-Fi: the device calls a URL',
  https_post: 'HTTPS: the device posts JSON',
  mqtt: 'MQTT: through a gateway or your own broker',
  lorawan: 'LoRaWAN: through the site gateway',
};

function ShellyUrlSteps({ issued }: { issued: IssuedDevice }) {
  const gen3 = issued.model === 'shelly-ht-gen3';
  return (
    <ol class="steps">
      <li>Connect to the device's own web page (its Wi-Fi access point, or its address on your network).</li>
      {gen3 ? (
        <li>
          Open <strong>Actions</strong>, add an action for the temperature and humidity reports, and paste the
          URL above as its address.
        </li>
      ) : (
        <li>
          Open <strong>Actions</strong> → <strong>Report sensor values</strong>, tick it, and paste the URL
          above.
        </li>
      )}
      <li>
        Save, then press the device's button once: it reports at once, and the reading shows on the site page.
      </li>
      <li>
        The URL holds the token: anyone with it can send readings as this device. If it leaks, rotate the
        token on the device page and paste the new URL.
      </li>
    </ol>
  );
}

function HttpSteps({ issued }: { issued: IssuedDevice }) {
  const example = [
    `curl -X POST '${issued.ingest_url}' \\`,
    `  -H 'Authorization: Bearer ${issued.ingest_token}' \\`,
    `  -H 'Content-Type: application/json' \\`,
    `  -d '{"device": "${issued.local_id}", "measurements": [{"type": "temperature", "value": 4.2}]}'`,
  ].join('\n');
  return (
    <>
      <ol class="steps">
        <li>
          The device sends <code>POST</code> to the ingest URL with the token as{' '}
          <code>Authorization: Bearer …</code> and a JSON body naming itself by its device ID{' '}
          <code>{issued.local_id}</code>.
        </li>
        <li>
          Each request carries up to 32 measurements (<code>type</code>, <code>value</code>, optional{' '}
          <code>label</code>, <code>unit</code>, and the reading's time <code>ts</code>); at most 60 requests
          a minute.
        </li>
        <li>A 200 answer means the readings are stored; retries of the same reading are not stored twice.</li>
      </ol>
      <p>For example, from a shell:</p>
      <pre class="config" tabIndex={0} aria-label="Example request">
        {example}
      </pre>
    </>
  );
}

function MqttSteps({ issued, accountId }: { issued: IssuedDevice; accountId: string }) {
  const topic = `service/${accountId}/${issued.local_id}`;
  return (
    <>
      <p>
        MQTT devices reach the cloud through an MQTT bridge of this site: the site's gateway (a Raspberry Pi
        running our gateway program) or your own broker (Mosquitto, EMQX). The bridge proves itself with a
        client certificate, so the token above is needed only if the device also sends over HTTPS.
      </p>
      <ol class="steps">
        <li>
          In <a href="/app/settings">Settings</a> → MQTT bridges, add a bridge for this site and download its
          bundle (certificate, key and CA: the key is shown once).
        </li>
        {issued.model === 'gateway-pi' ? (
          <li>
            On the Pi, install the gateway (<code>sudo bash hardware/pi/install.sh</code>), save the bundle as{' '}
            <code>/etc/sensor-gateway/bridge.json</code>, set up its collectors in{' '}
            <code>/etc/sensor-gateway/gateway.yaml</code>, check with <code>run-gateway --check</code>, then{' '}
            <code>sudo systemctl start sensor-gateway</code>.
          </li>
        ) : issued.model.startsWith('shelly-') ? (
          <li>
            In the Shelly's settings → MQTT: enable it, server <code>&lt;gateway address&gt;:1883</code> (the
            site gateway's own broker), leave the client id and topic prefix as they are. The prefix (e.g.{' '}
            <code>shellyplusht-08b61fcb7f3c</code>) is the device ID, so it should match{' '}
            <code>{issued.local_id}</code>.
          </li>
        ) : (
          <li>
            With your own broker, bridge it to the cloud with the bundle (MQTT 5, TLS with the client
            certificate, <code>cleansession false</code>) and the topic{' '}
            <code>service/{accountId}/# both 1</code>.
          </li>
        )}
        <li>
          Readings are published at QoS 1 to <code>{topic}</code> as JSON:{' '}
          <code>{'{"ts": "…", "measurements": [{"type": "temperature", "value": 4.2}]}'}</code>. The device is
          online once its first reading arrives.
        </li>
      </ol>
    </>
  );
}

function LorawanSteps({ issued }: { issued: IssuedDevice }) {
  return (
    <ol class="steps">
      <li>
        LoRaWAN sensors reach the cloud through the site gateway's ChirpStack collector: enable ChirpStack's
        MQTT integration and point the gateway's <code>collectors.chirpstack.url</code> at ChirpStack's
        broker.
      </li>
      <li>
        The device ID is the sensor's DevEUI in lower-case hex, so it should match{' '}
        <code>{issued.local_id}</code>.
      </li>
      <li>
        The gateway needs an MQTT bridge of this site (<a href="/app/settings">Settings</a> → MQTT bridges).
      </li>
    </ol>
  );
}

/**
 * The device's new credentials, shown once, with copy buttons, and what to do with them for its
 * model: the complete Shelly URL for Shelly URL models, the MQTT bridge steps for gateways and MQTT
 * devices, an example request for HTTPS devices.
 */
export function DeviceCredentials({
  issued,
  accountId,
  heading,
}: {
  issued: IssuedDevice;
  accountId: string;
  heading: string;
}) {
  const kind = issued.ingest_url_kind;
  return (
    <section class="card once" aria-labelledby="credentials-head">
      <h2 id="credentials-head">{heading}</h2>
      <p>
        <strong>Shown only now.</strong> Copy the token{kind === 'shelly_get' ? ' and the URL' : ''} before
        leaving this page; if it is lost, rotate the token on the device page.
      </p>
      <CopyValue label="Device token" value={issued.ingest_token} />
      <CopyValue label={kind === 'shelly_get' ? 'Shelly URL' : 'Ingest URL'} value={issued.ingest_url} />
      <h3>Set up the device</h3>
      {kind === 'shelly_get' && <ShellyUrlSteps issued={issued} />}
      {kind === 'https_post' && <HttpSteps issued={issued} />}
      {kind === 'mqtt' && <MqttSteps issued={issued} accountId={accountId} />}
      {kind === 'lorawan' && <LorawanSteps issued={issued} />}
    </section>
  );
}
